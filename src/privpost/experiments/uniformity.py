"""Distance of probability integral transforms from uniform: the statistic of a calibration check.

Below :mod:`privpost.experiments.calibration` (which computes the PITs and reports the distance)
and :mod:`privpost.experiments.plots` (which draws it), so that neither imports the other for it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ks_distance"]


def ks_distance(u) -> float:
    """Kolmogorov-Smirnov distance ``sup_u |ECDF(u) - u|`` of values in [0, 1] from uniform."""
    u = np.sort(np.asarray(u, dtype=float))
    r = u.size
    if r == 0:
        return float("nan")
    i = np.arange(1, r + 1)
    return float(max(np.max(i / r - u), np.max(u - (i - 1) / r)))
