"""Heavy modules imported once, when a web process starts, not on a lead's first visit (issue 24).

Matplotlib (0.6 s), SciPy's statistics (1.2 s: Spearman's rho, the Kolmogorov-Smirnov tests, clustering) and
the metrics and plot modules (0.3 s) are imported where they are used, so that a management command or a
worker that never draws a plot does not pay for them. A web process serves pages that use them, and the
first lead to open such a page after a start waited for the imports (0.5-1.8 s of a first visit). The WSGI
entry point (``config.wsgi``) calls :func:`preload`; with gunicorn's ``--preload`` (Dockerfile, compose) it
runs once in the master process and every worker starts with the modules in memory (shared, copy-on-write).
``FAIRTONE_PRELOAD=0`` turns it off. Nothing here opens a database connection (gunicorn forks after it).
"""

from __future__ import annotations

import importlib
import logging
import os
import time

logger = logging.getLogger(__name__)

#: Imported by :func:`preload`, in this order (matplotlib's backend is chosen before pyplot is imported).
MODULES = (
    "matplotlib",
    "matplotlib.pyplot",
    "scipy.stats",
    "scipy.sparse.csgraph",
    "sklearn.cluster",
    "pyarrow.parquet",
    "metrics.agreement",
    "metrics.report",
    "metrics.unfairness",
    "metrics.baseline_audit",
    "labeling.plots",
)


def preload() -> list[str]:
    """Import :data:`MODULES` (unless ``FAIRTONE_PRELOAD=0``); the names imported."""
    if os.environ.get("FAIRTONE_PRELOAD", "1") == "0":
        return []
    started = time.perf_counter()
    import matplotlib

    matplotlib.use("Agg")  # no display on a server
    done = []
    for name in MODULES:
        importlib.import_module(name)
        done.append(name)
    logger.info("preloaded %s modules in %.2f s", len(done), time.perf_counter() - started)
    return done
