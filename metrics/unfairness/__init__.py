"""The four unfairness scores of seed 000 on a per-sample model error.

The error is one number per sample where larger is worse (e.g. the mean deviation
between predicted and true silhouette boundaries, in mm). Seed 000 defines:

* **categorical** (gender): two-sample Kolmogorov-Smirnov test; if significant, the
  score is the difference of the group means;
* **continuous** (body shape, skin tone): least-squares line of error on the attribute,
  t-test on the slope; if significant, the score is the fitted error difference between
  the 5th and 95th percentile of the attribute;
* **intersectional**: standardise the attributes, run DBSCAN for
  ``eps = 10**-1.5, 10**-1.49, ..., 10**0``; a cluster of at least 10 points of which at
  least 70% have error >= 1.7 is underperforming; the score is the number of customers
  in such clusters;
* **severity**: each score is judged against an error threshold (2 mm in the seed).

Every score is computed even when it is not significant (``significant`` says whether
it should be acted upon), so that reports can show the effect size either way.

Layout
------
Import from ``metrics.unfairness`` (the names in ``__all__``); one module per
score: ``categorical``, ``continuous``, ``intersectional`` (the DBSCAN ensemble;
the clustering itself is ``metrics._dbscan``) and ``severity``; ``_checks``
validates the inputs they share.
"""

from .categorical import CategoricalUnfairness, PairUnfairness, categorical_unfairness
from .continuous import ContinuousUnfairness, continuous_unfairness
from .intersectional import (
    DEFAULT_EPS_EXPONENTS,
    EpsClusters,
    IntersectionalUnfairness,
    intersectional_unfairness,
    standardise,
)
from .severity import Severity, severity

__all__ = [
    "DEFAULT_EPS_EXPONENTS",
    "CategoricalUnfairness",
    "ContinuousUnfairness",
    "EpsClusters",
    "IntersectionalUnfairness",
    "PairUnfairness",
    "Severity",
    "categorical_unfairness",
    "continuous_unfairness",
    "intersectional_unfairness",
    "severity",
    "standardise",
]
