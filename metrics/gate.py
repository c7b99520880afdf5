"""Fairness gates for CI: pass or fail a ``report.json`` against rules, with reasons.

Used by ``python -m metrics gate report.json --fail-on significant-severe --max-score skin_tone=1.0``
(exit code 1 on a failed gate) and meant for the web app's gate API as well: :func:`evaluate`
takes the report as a dict.

Rules
-----
``fail_on`` (any of):

* ``significant``: any significant score (gender, body shape, skin tone, intersectional);
* ``significant-moderate``: any significant score whose severity is moderate or severe;
* ``significant-severe``: any significant score whose severity is severe;
* ``severe``: any severe score, significant or not.

``max_score``: attribute -> largest allowed score (``gender``, ``body_shape``, ``skin_tone``:
the absolute score in error units; for ``body_shape`` and ``skin_tone`` also the largest band
gap; ``intersectional``: customers in underperforming clusters). The gate fails when the score
exceeds the bound, significant or not.

Severity and significance are read as the report states them: for body shape and skin tone the
verdict that combines seed 000's slope test with the band means; for the intersectional score
the permutation test, severe when significant (its members' errors reach the cluster
threshold); a report without a permutation test never counts the intersectional score as
significant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["FAIL_ON", "GateResult", "GateRules", "evaluate", "parse_rules"]

FAIL_ON = ("significant", "significant-moderate", "significant-severe", "severe")
ATTRIBUTES = ("gender", "body_shape", "skin_tone", "intersectional")
_RANK = {"negligible": 0, "moderate": 1, "severe": 2}


@dataclass(frozen=True)
class GateRules:
    """Rules of a gate (see the module docstring)."""

    fail_on: tuple[str, ...] = ("significant-severe",)
    max_score: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GateResult:
    """Outcome of a gate.

    Attributes
    ----------
    passed : bool
        No rule failed.
    reasons : tuple of str
        One line per failed rule (empty when passed).
    checked : tuple of str
        One line per attribute found in the report, saying how it was read.
    """

    passed: bool
    reasons: tuple[str, ...]
    checked: tuple[str, ...] = ()


def parse_rules(fail_on: Iterable[str] = ("significant-severe",), max_score: Iterable[str] = ()) -> GateRules:
    """Rules from command-line strings: ``fail_on`` names and ``ATTR=VALUE`` bounds.

    Examples
    --------
    >>> parse_rules(["significant"], ["skin_tone=1.0", "intersectional=50"]).max_score
    {'skin_tone': 1.0, 'intersectional': 50.0}
    """
    fail_on = tuple(fail_on)
    unknown = [f for f in fail_on if f not in FAIL_ON]
    if unknown:
        raise ValueError(f"unknown --fail-on {', '.join(unknown)}; choose from {', '.join(FAIL_ON)}")
    bounds = {}
    for item in max_score:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in ATTRIBUTES:
            raise ValueError(f"--max-score {item!r}: use ATTRIBUTE=VALUE with ATTRIBUTE in {', '.join(ATTRIBUTES)}")
        try:
            bounds[name] = float(value)
        except ValueError:
            raise ValueError(f"--max-score {item!r}: {value!r} is not a number") from None
    return GateRules(fail_on=fail_on, max_score=bounds)


def _read(report: Mapping) -> dict[str, dict]:
    """Per attribute present: significant, level, score(s) and a description."""
    found = {}
    for key in ("gender", "body_shape", "skin_tone"):
        part = report.get(key)
        if not part:
            continue
        verdict = part.get("verdict")
        scores = [abs(part["score"])]
        if verdict is not None:
            significant, level = verdict["significant"], verdict["level"]
            scores.append(part["bands"]["gap"])
            where = f" (band {verdict['worst_band']}, {verdict['worse_end']} end worse)"
        else:
            significant, level, where = part["significant"], part["severity"], ""
        found[key] = {
            "significant": bool(significant),
            "level": level,
            "score": max(scores),
            "text": f"{key}: {'significant' if significant else 'not significant'}, {level}{where}",
        }
    inter = report.get("intersectional")
    if inter:
        significant = bool(inter.get("significant"))
        n = inter["n_customers"]
        found["intersectional"] = {
            "significant": significant,
            "level": "severe" if significant and n else "negligible",
            "score": float(n),
            "text": f"intersectional: {n} customer(s), "
            + ("no permutation test" if inter.get("p_value") is None else f"permutation p = {inter['p_value']:.3g}"),
        }
    return found


def evaluate(report: Mapping, rules: GateRules | None = None) -> GateResult:
    """Check a report (the dict of ``report.json``) against gate rules.

    Parameters
    ----------
    report : mapping
        The content of ``report.json``.
    rules : GateRules, optional
        Default: fail on any significant severe score.

    Returns
    -------
    GateResult
        Pass or fail, with one reason per failure.

    Examples
    --------
    >>> report = {"gender": {"significant": True, "severity": "severe", "score": 2.5}}
    >>> evaluate(report).reasons
    ('gender: significant, severe fails --fail-on significant-severe',)
    >>> evaluate(report, parse_rules(["significant-severe"], ["gender=3"])).passed
    False
    """
    rules = rules or GateRules()
    found = _read(report)
    reasons = []
    for item in found.values():
        for rule in rules.fail_on:
            failed = {
                "significant": item["significant"],
                "significant-moderate": item["significant"] and _RANK[item["level"]] >= 1,
                "significant-severe": item["significant"] and _RANK[item["level"]] >= 2,
                "severe": _RANK[item["level"]] >= 2,
            }[rule]
            if failed:
                reasons.append(f"{item['text']} fails --fail-on {rule}")
    for key, bound in rules.max_score.items():
        if key not in found:
            reasons.append(f"{key}: not in the report, so --max-score {key}={bound:g} cannot be checked")
        elif found[key]["score"] > bound:
            reasons.append(f"{key}: score {found[key]['score']:.3g} exceeds --max-score {key}={bound:g}")
    return GateResult(passed=not reasons, reasons=tuple(reasons), checked=tuple(i["text"] for i in found.values()))
