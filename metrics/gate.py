"""Fairness gates for CI: pass or fail a ``report.json`` against rules, with reasons.

Used by ``python -m metrics gate report.json --fail-on significant-severe --max-score skin_tone=1.0``
(exit code 1 on a failed gate) and by the web app's gate API: :func:`evaluate` takes the report as a dict.

Rules
-----
``fail_on`` (any of), on each attribute's disparity ``verdict`` (gender, body shape, skin tone, the
intersectional grid) and on the report's ``performance``:

* ``significant``: any significant disparity;
* ``significant-moderate``: any significant disparity whose level is moderate or severe (the gap's
  interval reaches half the threshold);
* ``significant-severe``: any significant disparity whose level is severe (the interval reaches the
  threshold);
* ``severe``: any severe disparity (severe implies significant: the level is read from the interval);
* ``not-negligible``: any disparity not shown negligible (the gap's interval reaches half the threshold),
  significant or not: the strict gate, which small data sets cannot pass;
* ``performance``: any band or group (or the whole data set) whose mean error is above the threshold by
  its interval: a model poor for everyone fails this, not the disparity rules;
* ``performance-possible``: also where the interval merely contains the threshold.

``max_score``: attribute -> largest allowed score (``gender``, ``body_shape``, ``skin_tone``: the
largest gap between bands or groups, and seed 000's score; ``intersectional``: seed 000's DBSCAN count,
samples in underperforming clusters). The gate fails when the score exceeds the bound, significant or not.

The level words are the report's own (``verdict.level``): the gate never re-derives a severity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAIL_ON", "FAIL_ON_TEXT", "GateResult", "GateRules", "evaluate", "parse_rules"]

FAIL_ON = (
    "significant",
    "significant-moderate",
    "significant-severe",
    "severe",
    "not-negligible",
    "performance",
    "performance-possible",
)
#: Each rule in words (the web app's gate form shows these).
FAIL_ON_TEXT = {
    "significant": "any significant disparity",
    "significant-moderate": "any significant disparity at least moderate (its interval reaches half the threshold)",
    "significant-severe": "any significant disparity that is severe (its interval reaches the threshold)",
    "severe": "any severe disparity",
    "not-negligible": "any disparity not shown negligible (strict: small data sets cannot pass)",
    "performance": "mean error above the threshold in any band or group (by its interval)",
    "performance-possible": "mean error possibly above the threshold in any band or group",
}
ATTRIBUTES = ("gender", "body_shape", "skin_tone", "intersectional")
_RANK = {"negligible": 0, "inconclusive": 1, "moderate": 2, "severe": 3}


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


def _read(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per attribute present: significant, level, score(s) and a description, from its verdict."""
    found = {}
    for key in ("gender", "body_shape", "skin_tone"):
        part = report.get(key)
        if not part:
            continue
        verdict = part["verdict"]
        seed = part.get("seed_000") or {}
        low, high = verdict["gap_ci"]
        where = f", {verdict['worst_band']} worst" if verdict["significant"] else ""
        found[key] = {
            "significant": bool(verdict["significant"]),
            "level": verdict["level"],
            "score": max(float(verdict["gap"]), abs(float(seed.get("score", 0.0)))),
            "text": f"{key}: {'significant' if verdict['significant'] else 'not significant'}, {verdict['level']} "
            f"(gap {verdict['gap']:.3g}, 95% CI {low:.3g} to {high:.3g}{where})",
        }
    inter = report.get("intersectional") or {}
    verdict = inter.get("verdict")
    seed = inter.get("seed_000") or {}
    if verdict or seed:
        significant = bool(verdict and verdict["significant"])
        regions = "; ".join((verdict or {}).get("regions", [])[:3])
        found["intersectional"] = {
            "significant": significant,
            "level": verdict["level"] if verdict else "inconclusive",
            "score": float(seed.get("n_customers", 0)),
            "text": "intersectional: "
            + (
                f"{'significant' if significant else 'not significant'}, {verdict['level']}"
                + (f" ({regions})" if significant and regions else "")
                if verdict
                else "no grid test"
            ),
        }
    return found


def _performance(report: Mapping[str, Any], possible: bool) -> list[str]:
    perf = report.get("performance")
    if not perf:
        return []
    where = list(perf.get("above", []))
    if perf["overall"]["reading"] == "above the threshold":
        where.insert(0, "overall")
    if possible:
        where += list(perf.get("may_reach", []))
        if perf["overall"]["reading"] == "may reach the threshold":
            where.insert(0, "overall (may reach)")
    return where


def evaluate(report: Mapping[str, Any], rules: GateRules | None = None) -> GateResult:
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
    >>> verdict = {"significant": True, "level": "severe", "gap": 2.5, "gap_ci": [2.1, 2.9], "worst_band": "m"}
    >>> report = {"gender": {"verdict": verdict, "seed_000": {"score": 2.5}}}
    >>> evaluate(report).reasons
    ('gender: significant, severe (gap 2.5, 95% CI 2.1 to 2.9, m worst) fails --fail-on significant-severe',)
    >>> evaluate(report, parse_rules(["not-negligible"], ["gender=3"])).passed
    False
    """
    rules = rules or GateRules()
    found = _read(report)
    reasons = []
    for item in found.values():
        for rule in rules.fail_on:
            if rule.startswith("performance"):
                continue
            failed = {
                "significant": item["significant"],
                "significant-moderate": item["significant"] and _RANK[item["level"]] >= _RANK["moderate"],
                "significant-severe": item["significant"] and _RANK[item["level"]] >= _RANK["severe"],
                "severe": _RANK[item["level"]] >= _RANK["severe"],
                "not-negligible": _RANK[item["level"]] >= _RANK["inconclusive"],
            }[rule]
            if failed:
                reasons.append(f"{item['text']} fails --fail-on {rule}")
    for rule in rules.fail_on:
        if rule.startswith("performance"):
            where = _performance(report, possible=rule == "performance-possible")
            if where:
                threshold = report["performance"]["threshold"]
                reasons.append(
                    f"performance: mean error above the threshold {threshold:g} in {', '.join(where)} "
                    f"fails --fail-on {rule}"
                )
    for key, bound in rules.max_score.items():
        if key not in found:
            reasons.append(f"{key}: not in the report, so --max-score {key}={bound:g} cannot be checked")
        elif found[key]["score"] > bound:
            reasons.append(f"{key}: score {found[key]['score']:.3g} exceeds --max-score {key}={bound:g}")
    checked = [i["text"] for i in found.values()]
    perf = report.get("performance")
    if perf:
        overall = perf["overall"]
        checked.append(f"performance: overall mean error {overall['mean_error']:.3g}, {overall['reading']}")
    return GateResult(passed=not reasons, reasons=tuple(reasons), checked=tuple(checked))
