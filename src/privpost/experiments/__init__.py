"""Simulation studies: calibration of inference methods and reproductions of the papers' results.

* :func:`privpost.experiments.calibration.calibrate` -- simulation-based calibration (Cook, Gelman
  & Rubin 2006; Talts et al. 2018) of any (model, query, mechanism, methods, n, epsilon grid), run
  on a local process pool or an existing Dask cluster, resumable from per-replicate files.
* :func:`privpost.experiments.reproduce.reproduce` -- the papers' experiments (seed 000, 003, 004)
  with our numbers next to theirs.

Both are importable lazily: ``privpost.calibrate`` is the same function as
``privpost.experiments.calibrate``.
"""

from __future__ import annotations

# The module privpost.experiments.reproduce and the function reproduce share a name: importing
# the module first, then binding the function, keeps ``privpost.experiments.reproduce`` the
# function (the module stays reachable as ``sys.modules["privpost.experiments.reproduce"]``).
# Both modules import only NumPy and privpost.errors at import time.
from privpost.experiments.calibration import CalibrationResult, calibrate, summarize  # noqa: E402
from privpost.experiments.reproduce import REPRODUCTIONS, reproduce  # noqa: E402

__all__ = ["calibrate", "CalibrationResult", "reproduce", "REPRODUCTIONS", "summarize"]
