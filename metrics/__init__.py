"""Pure-Python metrics (agreement, correlation, fairness); never imports Django.

Image colorimetry (ITA, apparent albedo) is the separate pure package ``colorimetry``.
``tests/metrics/test_pure_packages.py`` imports every module of both in a fresh
interpreter to check that no Django module gets loaded, and runs their doctests.
"""
