"""Comparing two finished runs on the same release, a model's history, and CI gates on a run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from django.core.exceptions import ValidationError

from metrics.compare import compare_errors
from metrics.gate import FAIL_ON, GateRules, evaluate

from ...models import EvaluationGate, EvaluationRun, Project
from ..audit import audit
from ..media_files import local_copy
from ..project_lifecycle import project_refuse_if_archived
from .joining import KEY
from .runs import evaluation_prefix, run_cluster

SCORE_TITLES = {
    "mean_error": "Mean error",
    "gender": "Gender score (largest gap between group means)",
    "skin_tone": "Skin-tone score (|slope x P5-P95|)",
    "skin_tone_band_gap": "Largest gap between skin-tone bands",
    "body_shape": "Body-shape score (|slope x P5-P95|)",
    "body_shape_band_gap": "Largest gap between body-shape bands",
}


def evaluation_compare(a: EvaluationRun, b: EvaluationRun, *, n_permutations: int = 999, seed: int = 0) -> dict:
    """Each score of run ``a`` and run ``b`` on their shared samples, the change and a paired test.

    Raises
    ------
    django.core.exceptions.ValidationError
        Not two finished runs of the same release and project, fewer than 3 shared samples.
    """
    if a.pk == b.pk:
        raise ValidationError("Choose two different runs.")
    if a.project_id != b.project_id or a.release_id != b.release_id:
        raise ValidationError("Only runs on the same release can be compared (their samples must be the same).")
    for run in (a, b):
        if run.status != EvaluationRun.Status.DONE:
            raise ValidationError(f"Run {run.name!r} is {run.get_status_display().lower()}, not finished.")
    if a.join.get("match_on") != b.join.get("match_on"):
        raise ValidationError("The two runs matched the release differently (per image vs per subject).")
    with local_copy(f"{evaluation_prefix(a)}/joined.parquet") as path:
        first = pd.read_parquet(path)
    with local_copy(f"{evaluation_prefix(b)}/joined.parquet") as path:
        second = pd.read_parquet(path, columns=[KEY, "error"])
    shared = first.merge(second, on=KEY, suffixes=("_a", "_b"), validate="one_to_one")
    if len(shared) < 3:
        raise ValidationError(f"The two runs share {len(shared)} samples; at least 3 are needed.")
    options = a.options
    gender = options.get("gender_column") if options.get("gender_column") == b.options.get("gender_column") else None
    body = (
        options.get("body_shape_column")
        if options.get("body_shape_column") == b.options.get("body_shape_column")
        else None
    )
    alpha = float(options.get("alpha", 0.05))
    cluster, _ = run_cluster(options, shared, a.join.get("match_on"))
    people = shared[cluster].to_numpy(dtype=object) if cluster and cluster in shared.columns else None
    try:
        changes = compare_errors(
            shared["error_a"].to_numpy(dtype=float),
            shared["error_b"].to_numpy(dtype=float),
            gender=shared[gender].astype(str).to_numpy() if gender and shared[gender].notna().all() else None,
            skin_tone=shared["final_value"].to_numpy(dtype=float)
            if np.isfinite(shared["final_value"].to_numpy(dtype=float)).all()
            else None,
            # A text body shape (groups) has no slope to compare: only a numeric one is compared here.
            body_shape=shared[body].to_numpy(dtype=float)
            if body and shared[body].notna().all() and pd.api.types.is_numeric_dtype(shared[body])
            else None,
            n_bands=int(options.get("n_bands", 5)),
            tone_bands=int(options["tone_bands"]) if options.get("tone_bands") else None,
            alpha=alpha,
            n_permutations=n_permutations,
            n_boot=n_permutations,
            seed=seed,
            clusters=people,
            levels=a.project.scale.tones.count(),
        )
    except ValueError as exc:
        raise ValidationError(f"These runs cannot be compared: {exc}") from None
    inter = [(run.report.get("intersectional") or {}) for run in (a, b)]
    return {
        "a": {"id": a.pk, "name": a.name, "model_name": a.model_name},
        "b": {"id": b.pk, "name": b.name, "model_name": b.model_name},
        "release": a.release.version if a.release_id else None,
        "n_shared": int(len(shared)),
        "only_a": int(a.join.get("matched", 0) - len(shared)),
        "only_b": int(b.join.get("matched", 0) - len(shared)),
        "alpha": alpha,
        "test": "paired permutation (each sample's two errors swapped at random"
        + (f"; a person's photos together, by {cluster}" if people is not None else "")
        + f"), {n_permutations} swaps; paired bootstrap {100 * (1 - alpha):g}% interval of the change"
        + (" (people resampled)" if people is not None else ""),
        "scores": [
            {
                "name": c.name,
                "title": SCORE_TITLES.get(c.name, c.name),
                "a": c.a,
                "b": c.b,
                "change": c.change,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "p_value": c.p_value,
                "significant": c.significant,
                "direction": "worse" if c.change > 0 else "better" if c.change < 0 else "same",
            }
            for c in changes
        ],
        "intersectional": {
            "a": _regions(inter[0]),
            "b": _regions(inter[1]),
            "note": "each run's intersectional grid verdict and regions, side by side; the change is not tested "
            "(a grid test per resample)",
        },
    }


def model_history(project: Project, model_name: str) -> list[dict]:
    """The finished runs of one model name, oldest first, with their headline scores."""
    rows = []
    runs = project.evaluations.filter(model_name=model_name, status=EvaluationRun.Status.DONE).select_related("release")
    for run in runs.order_by("created_at", "id"):
        report = run.report or {}
        rows.append(
            {
                "id": run.pk,
                "name": run.name,
                "release": run.release.version if run.release_id else None,
                "created_at": run.created_at,
                "gender": _score(report.get("gender")),
                "skin_tone": _score(report.get("skin_tone")),
                "body_shape": _score(report.get("body_shape")),
                "intersectional": _score(report.get("intersectional")),
            }
        )
        rows[-1]["parts"] = [rows[-1][k] for k in ("gender", "skin_tone", "body_shape", "intersectional")]
    return rows


def _score(part: dict | None) -> dict | None:
    """The headline of one attribute: its largest gap, significance and level (the report's verdict)."""
    verdict = (part or {}).get("verdict")
    if not verdict:
        return None
    return {"gap": verdict["gap"], "significant": verdict["significant"], "level": verdict["level"]}


def _regions(inter: dict) -> dict | None:
    verdict = inter.get("verdict")
    if not verdict:
        return None
    return {"significant": verdict["significant"], "level": verdict["level"], "regions": verdict.get("regions", [])}


def gate_rules_clean(data: dict[str, Any]) -> dict[str, Any]:
    """A gate's rules: ``fail_on`` (list of :data:`metrics.gate.FAIL_ON`) and ``max_score`` {attribute: number}."""
    problems = {}
    fail_on = data.get("fail_on", [])
    if isinstance(fail_on, str):
        fail_on = [fail_on]
    if not isinstance(fail_on, list) or any(f not in FAIL_ON for f in fail_on):
        problems["fail_on"] = f"choose any of {', '.join(FAIL_ON)}"
    max_score = data.get("max_score", {}) or {}
    attributes = ("gender", "body_shape", "skin_tone", "intersectional")
    clean_max = {}
    if not isinstance(max_score, dict):
        problems["max_score"] = "give {attribute: largest allowed score}"
    else:
        for key, value in max_score.items():
            if key not in attributes:
                problems["max_score"] = f"unknown attribute {key!r}; choose from {', '.join(attributes)}"
                continue
            if value in (None, ""):
                continue
            try:
                number = float(value)
                if not np.isfinite(number) or number < 0:
                    raise ValueError
            except (TypeError, ValueError):
                problems["max_score"] = f"{key}: give a number at least 0, got {value!r}"
                continue
            clean_max[key] = number
    if not problems and not fail_on and not clean_max:
        problems["fail_on"] = "a gate needs at least one rule"
    if problems:
        raise ValidationError(problems)
    return {"fail_on": list(dict.fromkeys(fail_on)), "max_score": clean_max}


def gate_create(project: Project, user, name: str, rules: dict[str, Any]) -> EvaluationGate:
    project_refuse_if_archived(project.pk, "change its gates")
    if name is not None and not isinstance(name, str):  # a JSON number or list (the deep schema run: a 500)
        raise ValidationError({"name": "A text name for the gate."})
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ValidationError({"name": "Give the gate a name (at most 200 characters)."})
    clean = gate_rules_clean(rules)
    if project.evaluation_gates.filter(name=name).exists():
        raise ValidationError({"name": f"This project already has a gate named {name!r}."})
    gate = EvaluationGate.objects.create(project=project, name=name, rules=clean, created_by=user)
    audit(project, "gate.create", gate, user=user, name=name, rules=clean)
    return gate


def gate_delete(project: Project, gate_id) -> int:
    """Remove one of the project's gates; returns how many were removed (0: no such gate in the project)."""
    project_refuse_if_archived(project.pk, "change its gates")
    deleted, _ = project.evaluation_gates.filter(pk=gate_id).delete()
    if deleted:
        audit(project, "gate.delete", ("evaluationgate", gate_id))
    return deleted


def gates_check(run: EvaluationRun, gates=None) -> dict:
    """Pass or fail of a finished run against the project's gates (or the given ones), with reasons."""
    if run.status != EvaluationRun.Status.DONE:
        raise ValidationError(f"Run {run.name!r} is {run.get_status_display().lower()}: no report to check yet.")
    gates = list(run.project.evaluation_gates.all()) if gates is None else gates
    results = []
    for gate in gates:
        rules = GateRules(fail_on=tuple(gate.rules.get("fail_on", [])), max_score=gate.rules.get("max_score", {}))
        outcome = evaluate(run.report, rules)
        results.append(
            {
                "gate": gate.name,
                "rules": gate.rules,
                "passed": outcome.passed,
                "reasons": list(outcome.reasons),
                "checked": list(outcome.checked),
            }
        )
    return {"run": run.pk, "passed": all(r["passed"] for r in results), "gates": results}
