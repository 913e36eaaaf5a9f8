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

from privpost._lazy import lazy_package

# Imported on first use (`privpost --help` registers the experiment commands, which must not
# import the reproductions and their SciPy dependencies). The module
# privpost.experiments.reproduce and the function reproduce share a name: the function wins
# (privpost._lazy); the module stays reachable as ``sys.modules["privpost.experiments.reproduce"]``.
_ATTRS = {
    "calibrate": ("privpost.experiments.calibration", "calibrate"),
    "CalibrationResult": ("privpost.experiments.calibration", "CalibrationResult"),
    "summarize": ("privpost.experiments.calibration", "summarize"),
    "reproduce": ("privpost.experiments.reproduce", "reproduce"),
    "REPRODUCTIONS": ("privpost.experiments.reproduce", "REPRODUCTIONS"),
}

__all__ = ["calibrate", "CalibrationResult", "reproduce", "REPRODUCTIONS", "summarize"]

lazy_package(__name__, _ATTRS, shadowed=("reproduce",))
