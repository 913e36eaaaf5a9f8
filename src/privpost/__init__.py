"""privpost: Bayesian inference from differentially private data.

The three objects (see ``docs/internals.md``):

* a :class:`~privpost.release.Release` -- query + mechanism + noisy values, made by
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

__version__ = "0.1.0"

# The module privpost.release and the function privpost.release share a name: importing the
# module eagerly here, then binding the function, keeps `pp.release(...)` the function for good.
from privpost.release import Release, ReleaseSet, release  # noqa: E402

_SUBMODULES = {"mechanisms", "queries", "models", "inference", "accounting", "posterior", "errors",
               "experiments", "io", "demo"}
_ATTRS = {
    "infer": ("privpost.inference", "infer"),
    "Posterior": ("privpost.posterior", "Posterior"),
    "ops_release": ("privpost.inference.ops", "ops_release"),
    "penalty_mcmc": ("privpost.inference.penalty", "penalty_mcmc"),
    "calibrate": ("privpost.experiments.calibration", "calibrate"),
    "declare": ("privpost.declaration", "declare"),   # the module is not named declare: a
    # submodule of that name would replace the function on import
}

__all__ = sorted(_SUBMODULES | set(_ATTRS) | {"Release", "ReleaseSet", "release"})


def __getattr__(name: str):
    # Lazy imports keep `import privpost` fast (Numba and ArviZ load only when used).
    if name in _ATTRS:
        module, attr = _ATTRS[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        value = importlib.import_module(f"privpost.{name}")
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privpost' has no attribute {name!r}")
