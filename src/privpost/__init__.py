"""privpost: Bayesian inference from differentially private data.

The three objects (see ``docs/internals.md``):

* a :class:`~privpost.releases.release.Release` -- query + mechanism + noisy values, made by
  :func:`privpost.release` on the curator side;
* a model from :mod:`privpost.models` -- prior, record simulator, conditional update;
* a method run by :func:`privpost.infer` -- returns a :class:`~privpost.posterior.Posterior`.

Example::

    import privpost as pp
    rel = pp.release(records, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(epsilon=1.0), seed=0)
    post = pp.infer(pp.models.BetaBernoulli(a=1, b=1), rel, method="damcmc",
                    draws=2000, warmup=1000, chains=2, seed=1)
    post.summary()
"""

from __future__ import annotations

import importlib
import os

from privpost._lazy import lazy_package
from privpost._numba_cache import ensure_fresh

# Numba's on-disk cache is invalidated per file only: drop it when any source changed, before
# a compiled module loads (privpost/_numba_cache.py says why)
ensure_fresh(os.path.dirname(os.path.abspath(__file__)))

__version__ = "0.1.0"

_SUBMODULES = {"mechanisms", "queries", "models", "inference", "accounting", "posterior", "errors",
               "experiments", "io", "demo", "releases"}


def _module(name: str):
    """A lazy attribute whose value is the module ``name`` (imported on first access)."""
    return lambda: importlib.import_module(name)


_ATTRS = {
    "release": ("privpost.releases.release", "release"),
    "Release": ("privpost.releases.release", "Release"),
    "ReleaseSet": ("privpost.releases.release", "ReleaseSet"),
    "infer": ("privpost.inference", "infer"),
    "Posterior": ("privpost.posterior", "Posterior"),
    "ops_release": ("privpost.inference.ops", "ops_release"),
    "penalty_mcmc": ("privpost.inference.penalty", "penalty_mcmc"),
    "calibrate": ("privpost.experiments.calibration", "calibrate"),
    "from_opendp": ("privpost.releases.interop", "from_opendp"),
    "from_pipelinedp": ("privpost.releases.interop", "from_pipelinedp"),
    "from_diffprivlib": ("privpost.releases.interop", "from_diffprivlib"),
    "declare": ("privpost.releases.declaration", "declare"),
    # the importers and the census reader live in privpost.releases; pp.interop / pp.census are
    # those modules (there is no privpost/interop.py or privpost/census.py)
    "interop": _module("privpost.releases.interop"),
    "census": _module("privpost.releases.census"),
}

__all__ = sorted(_SUBMODULES | set(_ATTRS))

# Everything is imported on first use, so that `import privpost` (and `privpost --help`) loads
# neither NumPy nor SciPy, Numba or ArviZ (tests/test_startup_imports.py guards this).
lazy_package(__name__, _ATTRS, _SUBMODULES)
