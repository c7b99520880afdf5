"""Pure-Python metrics (agreement, colorimetry, fairness); never imports Django."""
