# Over 600 lines on purpose: the module is one class, MetricFrame, and the value and metric
# types it returns (MetricValue, CountMetric). Its bootstrap, derived values and by_group table
# share the frame's state and are read together against Fairlearn's semantics described below.
"""Disaggregated metrics by group and by intersections of groups, with honest edge cases.

The semantics follow Fairlearn's ``MetricFrame`` (Weerts et al., "Fairlearn: Assessing and
Improving Fairness of AI Systems", JMLR 2023 [Weerts2023]; user guide "Assessment"): ``overall``,
``by_group``, ``group_min``/``group_max``, ``difference`` and ``ratio`` with
``method="between_groups"`` or ``"to_overall"``. Several sensitive features give one group per
combination of their values (all combinations, observed or not, as Fairlearn does).

What this module adds:

- **Undefined values are explicit.** A metric value is a :class:`MetricValue`: a number, or
  ``value=None`` with a ``reason`` ("empty group: no samples", "no positives (y_true ==
  pos_label): recall is 0/0", ...). In :attr:`MetricFrame.by_group` an undefined value is NaN
  with its reason in the ``<metric>_reason`` column next to it, never a silent NaN. Built-in
  metrics know their denominators; for a user function, NaN results, ``ZeroDivisionError``/
  ``ValueError``/``FloatingPointError`` and scikit-learn's ``UndefinedMetricWarning`` (whose
  fallback value, 0 by default, would otherwise pass for a measurement) become undefined.
- **Small groups are flagged**: groups with fewer than ``min_group_size`` samples (empty ones
  included) are listed in :attr:`MetricFrame.small_groups` and a :class:`SmallGroupWarning`
  is emitted, always both.
- **Bootstrap confidence intervals** (``n_boot > 0``): seeded, stratified by group (each group
  is resampled with replacement within itself, keeping its size; the overall value is computed
  on the union), percentile intervals at level ``ci`` for values, minima and maxima.
  Differences and ratios get simultaneous intervals (the largest bootstrap deviation of any
  gap, see ``MetricFrame._simultaneous``) that cover 0 (ratio: 1) at about the nominal rate
  when groups do not differ, where a percentile interval of ``max - min`` almost never
  does. They use the replicates in which every group defined at the point estimate stays
  defined; the count used is ``n_boot_defined``. Fairlearn's bootstrap resamples the whole dataset instead, so its
  intervals differ slightly.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

__all__ = [
    "BUILTIN_METRICS",
    "CountMetric",
    "MetricFrame",
    "MetricValue",
    "SmallGroupWarning",
    "accuracy",
    "false_positive_rate",
    "mean_absolute_error",
    "mean_error",
    "precision",
    "recall",
    "selection_rate",
]

EMPTY_GROUP = "empty group: no samples"
Method = Literal["between_groups", "to_overall"]
# Bootstrap resamples are drawn in blocks of at most this many indices, to bound memory
# (8 bytes each: 4e6 indices is 32 MB).
_BOOT_BLOCK = 4_000_000


class SmallGroupWarning(UserWarning):
    """A group has fewer samples than ``min_group_size``: its metrics are unreliable."""


@dataclass(frozen=True)
class MetricValue:
    """A metric value, or an explicit reason why it is undefined.

    Attributes
    ----------
    value : float or None
        The value; None when undefined.
    reason : str or None
        Why the value is undefined (None when defined).
    ci_low, ci_high : float or None
        Bootstrap percentile interval, when computed and at least two replicates were defined.
    n_boot_defined : int or None
        Number of bootstrap replicates behind the interval (None without bootstrap).
    """

    value: float | None
    reason: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_boot_defined: int | None = None

    @classmethod
    def undefined(cls, reason: str) -> MetricValue:
        """An undefined value with its reason."""
        return cls(value=None, reason=reason)

    @property
    def defined(self) -> bool:
        """True when there is a value."""
        return self.value is not None

    def __float__(self) -> float:
        return float("nan") if self.value is None else float(self.value)


# Per-sample numerator and denominator of the built-in ratio metrics, and the reason when the
# denominator sums to zero.
_COUNT_METRICS: dict[str, str] = {
    "accuracy": "",
    "recall": "no positives (y_true == pos_label): recall is 0/0",
    "precision": "no predicted positives (y_pred == pos_label): precision is 0/0",
    "false_positive_rate": "no negatives (y_true != pos_label): false positive rate is 0/0",
    "selection_rate": "",
    "mean_error": "",
    "mean_absolute_error": "",
}


@dataclass(frozen=True)
class CountMetric:
    """A built-in metric that is a ratio of two sums over samples.

    Call it like a scikit-learn metric, ``metric(y_true, y_pred)``; it returns a
    :class:`MetricValue` that is undefined (with a reason) when its denominator is zero.
    Change the positive label with ``dataclasses.replace(recall, pos_label="yes")``.

    Definitions (``P`` = ``pos_label``): accuracy ``mean(y_true == y_pred)``; recall (true
    positive rate) ``#(y_true == P and y_pred == P) / #(y_true == P)``; precision
    ``#(both P) / #(y_pred == P)``; false positive rate ``#(y_true != P and y_pred == P) /
    #(y_true != P)``; selection rate ``mean(y_pred == P)``; mean error ``mean(y_pred - y_true)``
    (signed: positive means over-estimation); mean absolute error ``mean(|y_pred - y_true|)``.

    Parameters
    ----------
    name : str
        One of ``BUILTIN_METRICS``.
    pos_label : object, default 1
        The positive class for the classification metrics.

    Examples
    --------
    >>> recall([0, 0, 1, 1], [0, 1, 1, 0]).value
    0.5
    >>> recall([0, 0], [0, 1]).reason
    'no positives (y_true == pos_label): recall is 0/0'
    """

    name: str
    pos_label: Any = 1

    def __post_init__(self) -> None:
        if self.name not in _COUNT_METRICS:
            raise ValueError(f"unknown built-in metric {self.name!r}")

    @property
    def __name__(self) -> str:  # so that it names itself like a function
        return self.name

    def parts(self, y_true: ArrayLike, y_pred: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Per-sample numerator and denominator terms; the metric is ``sum(num) / sum(den)``."""
        truth = np.asarray(y_true)
        pred = np.asarray(y_pred)
        ones = np.ones(truth.shape[0])
        name = self.name
        if name == "mean_error":
            return pred.astype(float) - truth.astype(float), ones
        if name == "mean_absolute_error":
            return np.abs(pred.astype(float) - truth.astype(float)), ones
        if name == "accuracy":
            return (truth == pred).astype(float), ones
        positive_true = truth == self.pos_label
        positive_pred = pred == self.pos_label
        if name == "selection_rate":
            return positive_pred.astype(float), ones
        if name == "recall":
            return (positive_true & positive_pred).astype(float), positive_true.astype(float)
        if name == "precision":
            return (positive_true & positive_pred).astype(float), positive_pred.astype(float)
        # false_positive_rate
        return (~positive_true & positive_pred).astype(float), (~positive_true).astype(float)

    def from_sums(self, numerator: float, denominator: float, n: int) -> MetricValue:
        """The metric value from summed parts over ``n`` samples."""
        if n == 0:
            return MetricValue.undefined(EMPTY_GROUP)
        if denominator == 0:
            return MetricValue.undefined(_COUNT_METRICS[self.name])
        return MetricValue(float(numerator / denominator))

    def __call__(self, y_true: ArrayLike, y_pred: ArrayLike) -> MetricValue:
        numerator, denominator = self.parts(y_true, y_pred)
        return self.from_sums(numerator.sum(), denominator.sum(), numerator.shape[0])


accuracy = CountMetric("accuracy")
recall = CountMetric("recall")
precision = CountMetric("precision")
false_positive_rate = CountMetric("false_positive_rate")
selection_rate = CountMetric("selection_rate")
mean_error = CountMetric("mean_error")
mean_absolute_error = CountMetric("mean_absolute_error")
BUILTIN_METRICS: dict[str, CountMetric] = {
    m.name: m
    for m in (
        accuracy,
        recall,
        precision,
        false_positive_rate,
        selection_rate,
        mean_error,
        mean_absolute_error,
    )
}


def _call_metric(function: Callable[..., Any], name: str, y_true: np.ndarray, y_pred: np.ndarray) -> MetricValue:
    """Evaluate one metric on one (non-empty) subset, turning failure modes into reasons."""
    if isinstance(function, CountMetric):
        return function(y_true, y_pred)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(y_true, y_pred)
        except (ZeroDivisionError, ValueError, FloatingPointError) as error:
            return MetricValue.undefined(f"{name} raised {type(error).__name__}: {error}")
    undefined_warning = None
    for record in caught:
        if record.category.__name__ == "UndefinedMetricWarning":
            undefined_warning = str(record.message)
        else:
            warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)
    if undefined_warning is not None:
        return MetricValue.undefined(f"{name}: {undefined_warning}")
    if isinstance(result, MetricValue):
        return result
    value = float(result)
    if np.isnan(value):
        return MetricValue.undefined(f"{name} returned NaN")
    return MetricValue(value)


def _feature_table(sensitive_features: Any, n: int) -> tuple[list[str], list[list[Any]], np.ndarray]:
    """Names, levels per feature, and an (n, n_features) array of level codes."""
    if isinstance(sensitive_features, pd.DataFrame):
        columns = {str(c): sensitive_features[c] for c in sensitive_features.columns}
    elif isinstance(sensitive_features, pd.Series):
        columns = {str(sensitive_features.name or "sensitive_feature_0"): sensitive_features}
    elif isinstance(sensitive_features, pd.Categorical):
        columns = {"sensitive_feature_0": pd.Series(sensitive_features)}
    elif isinstance(sensitive_features, Mapping):
        columns = {str(k): v for k, v in sensitive_features.items()}
    else:
        array = np.asarray(sensitive_features, dtype=object)
        if array.ndim == 1:
            columns = {"sensitive_feature_0": pd.Series(array)}
        elif array.ndim == 2:
            columns = {f"sensitive_feature_{i}": pd.Series(array[:, i]) for i in range(array.shape[1])}
        else:
            raise ValueError("sensitive_features must be 1-D or 2-D")
    if not columns:
        raise ValueError("at least one sensitive feature is needed")
    names, levels, codes = [], [], []
    for name, column in columns.items():
        series = pd.Series(column).reset_index(drop=True)
        if series.shape[0] != n:
            raise ValueError(f"sensitive feature {name!r} has {series.shape[0]} rows, not {n}")
        if series.isna().any():
            raise ValueError(
                f"sensitive feature {name!r} has missing values; give them an explicit "
                "category (e.g. 'unknown') so they form a visible group"
            )
        if isinstance(series.dtype, pd.CategoricalDtype):
            # Declared categories count even when unobserved: they show up as empty groups.
            categorical = series.cat
            levels.append(list(categorical.categories))
            codes.append(categorical.codes.to_numpy())
        else:
            level_codes, uniques = pd.factorize(series, sort=True)
            levels.append(list(uniques))
            codes.append(level_codes)
        names.append(name)
    return names, levels, np.column_stack(codes)


def _derived(values: np.ndarray, overall: np.ndarray, kind: str) -> np.ndarray:
    """Summary across groups per row; NaN where undefined. ``values`` is (rows, groups)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        defined = ~np.isnan(values)
        n_defined = defined.sum(axis=1)
        low = np.nanmin(np.where(defined, values, np.nan), axis=1)
        high = np.nanmax(np.where(defined, values, np.nan), axis=1)
        negative = np.any(defined & (values < 0), axis=1)
        if kind == "group_min":
            return np.asarray(low)
        if kind == "group_max":
            return np.asarray(high)
        if kind == "difference_between_groups":
            return np.where(n_defined >= 2, high - low, np.nan)
        if kind == "difference_to_overall":
            return np.asarray(np.nanmax(np.abs(values - overall[:, None]), axis=1))
        if kind == "ratio_between_groups":
            result = np.where(high > 0, low / high, np.nan)
            return np.where((n_defined >= 2) & ~negative, result, np.nan)
        if kind == "ratio_to_overall":
            quotient = values / overall[:, None]
            quotient = np.where(quotient > 1, 1 / quotient, quotient)
            result = np.nanmin(quotient, axis=1)
            valid = (overall > 0) & ~negative & (n_defined >= 1)
            return np.where(valid, result, np.nan)
    raise ValueError(kind)


def _derived_reason(values: np.ndarray, overall: float, kind: str) -> str | None:
    """Why :func:`_derived` is undefined for one row of point estimates (None if defined)."""
    defined = values[~np.isnan(values)]
    if defined.size == 0:
        return "no group has a defined value"
    if kind.endswith("to_overall") and np.isnan(overall):
        return "the overall value is undefined"
    if kind.startswith("difference_between") and defined.size < 2:
        return "fewer than two groups have a defined value"
    if kind.startswith("ratio"):
        if np.any(defined < 0):
            return "ratios need non-negative metric values"
        if kind == "ratio_between_groups":
            if defined.size < 2:
                return "fewer than two groups have a defined value"
            if defined.max() == 0:
                return "every group has value 0: the ratio is 0/0"
        if kind == "ratio_to_overall" and overall == 0:
            return "the overall value is 0: the ratio is undefined"
    return None


class MetricFrame:
    """Metrics overall, per group and per intersection of groups (Fairlearn semantics).

    Parameters
    ----------
    metrics : callable, str, or mapping/sequence of them
        Metric functions with scikit-learn's signature ``f(y_true, y_pred)`` returning a float
        or a :class:`MetricValue`, or names of built-ins (``BUILTIN_METRICS``). A mapping gives
        the names; otherwise the function's ``__name__`` is used.
    y_true, y_pred : array_like, shape (n,)
        Ground truth and predictions (for error metrics: the true and predicted quantities).
    sensitive_features : array_like, Series, DataFrame or mapping of arrays
        One or more sensitive features; with several, groups are all combinations of their
        values. Pandas categoricals keep unobserved categories as empty groups.
    min_group_size : int, default 30
        Groups with fewer samples are listed in ``small_groups`` and warned about.
    n_boot : int, default 0
        Number of bootstrap replicates for confidence intervals (0: none).
    ci : float, default 0.95
        Confidence level of the percentile intervals.
    seed : int, optional
        Seed of the bootstrap generator (``numpy.random.default_rng``).

    Attributes
    ----------
    overall : dict[str, Any] of str to MetricValue
        Each metric on all samples.
    groups : list
        Group keys (a tuple per group with several features), in ``by_group`` order.
    group_sizes : dict[str, Any]
        Group key -> number of samples.
    small_groups : tuple
        Groups with fewer than ``min_group_size`` samples (empty ones included).
    empty_groups : tuple
        Groups without samples.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", SmallGroupWarning)
    ...     frame = MetricFrame(metrics="recall", y_true=[1, 1, 0, 1, 0, 0],
    ...                         y_pred=[1, 0, 0, 1, 1, 0],
    ...                         sensitive_features=["a", "a", "a", "b", "b", "b"])
    >>> frame.by_group["recall"].tolist()
    [0.5, 1.0]
    >>> round(frame.difference()["recall"].value, 3)
    0.5
    """

    def __init__(
        self,
        *,
        metrics: Callable[..., Any] | str | Mapping[str, Callable[..., Any] | str] | Sequence[Callable[..., Any] | str],
        y_true: ArrayLike,
        y_pred: ArrayLike,
        sensitive_features: Any,
        min_group_size: int = 30,
        n_boot: int = 0,
        ci: float = 0.95,
        seed: int | None = None,
    ) -> None:
        self._metrics = self._resolve_metrics(metrics)
        self._y_true = np.asarray(y_true)
        self._y_pred = np.asarray(y_pred)
        n = self._y_true.shape[0]
        if self._y_pred.shape[0] != n:
            raise ValueError("y_true and y_pred must have the same length")
        if not 0 < ci < 1:
            raise ValueError("ci must lie in (0, 1)")
        if n_boot < 0:
            raise ValueError("n_boot must be >= 0")
        self.ci = ci
        self.n_boot = n_boot
        self.min_group_size = min_group_size
        names, levels, codes = _feature_table(sensitive_features, n)
        self.sensitive_feature_names = names
        combos = list(itertools.product(*[range(len(lv)) for lv in levels]))
        if len(names) == 1:
            self.groups = [levels[0][c[0]] for c in combos]
        else:
            self.groups = [tuple(levels[i][c[i]] for i in range(len(names))) for c in combos]
        # One flat code per row: mixed-radix number of the per-feature codes.
        radices = [len(lv) for lv in levels]
        flat = np.zeros(n, dtype=np.int64)
        for i, radix in enumerate(radices):
            flat = flat * radix + codes[:, i]
        order = np.argsort(flat, kind="stable")
        bounds = np.searchsorted(flat[order], np.arange(len(combos) + 1))
        self._indices = [order[bounds[g] : bounds[g + 1]] for g in range(len(combos))]
        self.group_sizes = {g: int(ix.size) for g, ix in zip(self.groups, self._indices)}
        self.empty_groups = tuple(g for g, size in self.group_sizes.items() if size == 0)
        self.small_groups = tuple(g for g, size in self.group_sizes.items() if size < min_group_size)
        if self.small_groups:
            listed = ", ".join(f"{g!r} (n={self.group_sizes[g]})" for g in self.small_groups)
            warnings.warn(
                f"{len(self.small_groups)} group(s) below min_group_size={min_group_size}: "
                f"{listed}; their metrics are unreliable",
                SmallGroupWarning,
                stacklevel=2,
            )
        self._point: dict[str, list[MetricValue]] = {}
        self.overall: dict[str, MetricValue] = {}
        for name, function in self._metrics.items():
            self._point[name] = [self._evaluate(function, name, ix) for ix in self._indices]
            self.overall[name] = self._evaluate(function, name, np.arange(n))
        self._boot_groups: dict[str, np.ndarray] = {}
        self._boot_overall: dict[str, np.ndarray] = {}
        if n_boot:
            self._bootstrap(np.random.default_rng(seed))
            self._attach_intervals()

    # -- construction helpers -------------------------------------------------------------

    @staticmethod
    def _resolve_metrics(metrics: Any) -> dict[str, Callable[..., Any]]:
        def resolve(item: Callable[..., Any] | str) -> Callable[..., Any]:
            if isinstance(item, str):
                if item not in BUILTIN_METRICS:
                    raise ValueError(f"unknown built-in metric {item!r}: {list(BUILTIN_METRICS)}")
                return BUILTIN_METRICS[item]
            if not callable(item):
                raise TypeError(f"metric {item!r} is not callable")
            return item

        if isinstance(metrics, Mapping):
            return {str(k): resolve(v) for k, v in metrics.items()}
        if isinstance(metrics, str) or callable(metrics):
            metrics = [metrics]
        resolved = {}
        for item in metrics:
            function = resolve(item)
            resolved[getattr(function, "__name__", repr(function))] = function
        if not resolved:
            raise ValueError("at least one metric is needed")
        return resolved

    def _evaluate(self, function: Callable[..., Any], name: str, rows: np.ndarray) -> MetricValue:
        if rows.size == 0:
            return MetricValue.undefined(EMPTY_GROUP)
        return _call_metric(function, name, self._y_true[rows], self._y_pred[rows])

    def _bootstrap(self, rng: np.random.Generator) -> None:
        n_groups = len(self._indices)
        for name in self._metrics:
            self._boot_groups[name] = np.full((self.n_boot, n_groups), np.nan)
            self._boot_overall[name] = np.full(self.n_boot, np.nan)
        count_metrics = {k: f for k, f in self._metrics.items() if isinstance(f, CountMetric)}
        other_metrics = {k: f for k, f in self._metrics.items() if k not in count_metrics}
        parts = {k: f.parts(self._y_true, self._y_pred) for k, f in count_metrics.items()}
        # Sums per (replicate, group) for the vectorised built-ins.
        sums = {k: np.zeros((2, self.n_boot, n_groups)) for k in count_metrics}
        # Resampled rows per replicate, only needed by arbitrary callables.
        chosen: list[list[np.ndarray]] = [[] for _ in range(self.n_boot)] if other_metrics else []
        for g, rows in enumerate(self._indices):
            size = rows.size
            if size == 0:
                continue
            block = max(1, _BOOT_BLOCK // size)
            for start in range(0, self.n_boot, block):
                stop = min(self.n_boot, start + block)
                draws = rows[rng.integers(0, size, size=(stop - start, size))]
                for k, (numerator, denominator) in parts.items():
                    sums[k][0, start:stop, g] = numerator[draws].sum(axis=1)
                    sums[k][1, start:stop, g] = denominator[draws].sum(axis=1)
                if other_metrics:
                    for b in range(start, stop):
                        chosen[b].append(draws[b - start])
        sizes = np.array([ix.size for ix in self._indices])
        for k in count_metrics:
            numerator, denominator = sums[k]
            with np.errstate(all="ignore"):
                per_group = np.where(denominator > 0, numerator / denominator, np.nan)
                total_den = denominator.sum(axis=1)
                total = np.where(total_den > 0, numerator.sum(axis=1) / total_den, np.nan)
            per_group[:, sizes == 0] = np.nan
            self._boot_groups[k] = per_group
            self._boot_overall[k] = total
        for b in range(len(chosen)):
            for k, function in other_metrics.items():
                group_rows = iter(chosen[b])
                for g, rows in enumerate(self._indices):
                    if rows.size:
                        self._boot_groups[k][b, g] = float(self._evaluate(function, k, next(group_rows)))
                self._boot_overall[k][b] = float(self._evaluate(function, k, np.concatenate(chosen[b])))

    def _interval(self, samples: np.ndarray) -> tuple[float | None, float | None, int]:
        finite = samples[~np.isnan(samples)]
        if finite.size < 2:
            return None, None, int(finite.size)
        tail = (1 - self.ci) / 2
        low, high = np.quantile(finite, [tail, 1 - tail])
        return float(low), float(high), int(finite.size)

    def _with_interval(self, value: MetricValue, samples: np.ndarray) -> MetricValue:
        if not value.defined:
            return value
        low, high, count = self._interval(samples)
        return MetricValue(value.value, None, low, high, count)

    def _attach_intervals(self) -> None:
        for name in self._metrics:
            self._point[name] = [
                self._with_interval(v, self._boot_groups[name][:, g]) for g, v in enumerate(self._point[name])
            ]
            self.overall[name] = self._with_interval(self.overall[name], self._boot_overall[name])

    # -- results ----------------------------------------------------------------------------

    @property
    def metric_names(self) -> list[str]:
        """Names of the metrics, in column order."""
        return list(self._metrics)

    def values(self, metric: str) -> dict[Hashable, MetricValue]:
        """Group key -> :class:`MetricValue` for one metric."""
        return dict(zip(self.groups, self._point[metric]))

    @property
    def by_group(self) -> pd.DataFrame:
        """One row per group: ``n``, ``small_group``, and per metric ``<m>`` (NaN only when
        undefined), ``<m>_reason`` and, with bootstrap, ``<m>_ci_low``/``<m>_ci_high``."""
        if len(self.sensitive_feature_names) == 1:
            index = pd.Index(self.groups, name=self.sensitive_feature_names[0])
        else:
            index = pd.MultiIndex.from_tuples(self.groups, names=self.sensitive_feature_names)
        small = set(self.small_groups)
        data: dict[str, list[Any]] = {
            "n": [self.group_sizes[g] for g in self.groups],
            "small_group": [g in small for g in self.groups],
        }
        for name in self._metrics:
            cells = self._point[name]
            data[name] = [float(v) for v in cells]
            data[f"{name}_reason"] = [v.reason for v in cells]
            if self.n_boot:
                data[f"{name}_ci_low"] = [np.nan if v.ci_low is None else v.ci_low for v in cells]
                data[f"{name}_ci_high"] = [np.nan if v.ci_high is None else v.ci_high for v in cells]
        return pd.DataFrame(data, index=index)

    def _summary(self, kind: str) -> dict[str, MetricValue]:
        result = {}
        for name in self._metrics:
            point = np.array([[float(v) for v in self._point[name]]])
            overall = np.array([float(self.overall[name])])
            reason = _derived_reason(point[0], overall[0], kind)
            if reason is not None:
                result[name] = MetricValue.undefined(reason)
                continue
            value = MetricValue(float(_derived(point, overall, kind)[0]))
            if self.n_boot:
                boot = self._boot_groups[name]
                # Keep replicates where every group defined at the point estimate is defined.
                keep = ~np.any(np.isnan(boot[:, ~np.isnan(point[0])]), axis=1)
                simultaneous = self._simultaneous(
                    kind, point[0], overall[0], boot[keep], self._boot_overall[name][keep]
                )
                if simultaneous is not None:
                    value = MetricValue(value.value, None, *simultaneous)
                else:
                    samples = _derived(boot[keep], self._boot_overall[name][keep], kind)
                    value = self._with_interval(value, samples)
            result[name] = value
        return result

    def _simultaneous(
        self, kind: str, point: np.ndarray, overall: float, boot: np.ndarray, boot_overall: np.ndarray
    ) -> tuple[float, float, int] | None:
        """Interval of a difference or ratio from simultaneous bootstrap bounds on all gaps.

        ``max - min`` over groups is biased upwards (the largest of noisy gaps): its
        percentile interval excluded 0 in nearly every data set with no difference at all.
        Instead, ``c`` is the ``ci`` quantile of the largest bootstrap deviation of any
        pairwise gap (to-overall: any group-minus-overall gap) from its point value; with
        probability about ``ci`` every true gap lies within ``c`` of its estimate, so the
        true largest gap lies in ``[max(0, D - c), D + c]``. Under no difference this covers
        0 exactly when ``D <= c``, at about the nominal rate (``tests/metrics/test_verdict.py``
        checks it by simulation). Ratios use the same bounds on log values (all positive).
        None when the construction does not apply (then the percentile interval is used).
        """
        defined = ~np.isnan(point)
        if boot.shape[0] < 2 or (kind.startswith("difference_between") and defined.sum() < 2):
            return None
        if not kind.startswith("difference") and not kind.startswith("ratio"):
            return None
        m = point[defined]
        b = boot[:, defined]
        o, bo = overall, boot_overall
        ratio = kind.startswith("ratio")
        if ratio:
            if np.any(m <= 0) or np.any(b <= 0) or (kind.endswith("overall") and (o <= 0 or np.any(bo <= 0))):
                return None
            m, b = np.log(m), np.log(b)
            if kind.endswith("overall"):
                o, bo = np.log(o), np.log(bo)
        if kind.endswith("between_groups"):
            deviation = b - m
            spread = deviation.max(axis=1) - deviation.min(axis=1)
            gap = float(m.max() - m.min())
        else:
            if np.isnan(o) or np.any(np.isnan(bo)):
                return None
            spread = np.abs((b - bo[:, None]) - (m - o)).max(axis=1)
            gap = float(np.abs(m - o).max())
        c = float(np.quantile(spread, self.ci))
        low, high = max(0.0, gap - c), gap + c
        if ratio:
            low, high = float(np.exp(-high)), float(min(1.0, np.exp(-low)))
        return low, high, int(boot.shape[0])

    def group_min(self) -> dict[str, MetricValue]:
        """Smallest defined group value per metric."""
        return self._summary("group_min")

    def group_max(self) -> dict[str, MetricValue]:
        """Largest defined group value per metric."""
        return self._summary("group_max")

    def difference(self, method: Method = "between_groups") -> dict[str, MetricValue]:
        """``max - min`` over groups, or the largest ``|group - overall|`` (``"to_overall"``).

        Undefined groups are left out (they are listed in ``by_group``).
        """
        if method not in ("between_groups", "to_overall"):
            raise ValueError("method must be 'between_groups' or 'to_overall'")
        return self._summary(f"difference_{method}")

    def ratio(self, method: Method = "between_groups") -> dict[str, MetricValue]:
        """``min / max`` over groups, or the smallest of ``group/overall`` and
        ``overall/group`` (``"to_overall"``). Undefined for negative values and 0/0."""
        if method not in ("between_groups", "to_overall"):
            raise ValueError("method must be 'between_groups' or 'to_overall'")
        return self._summary(f"ratio_{method}")
