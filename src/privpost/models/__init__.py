"""Models: priors, record simulators and conditional updates (protocol: :mod:`privpost.models.base`).

Spec name -> class: parameters (shape); records; fitting queries.

* ``beta-bernoulli`` -> :class:`BetaBernoulli`: ``theta ()``; ``(n,)`` 0/1 floats; Sum, Mean.
* ``poisson-gamma`` -> :class:`PoissonGamma`: ``lam ()``; ``(n,)`` counts (floats); Sum, Mean,
  TruncatedSum.
* ``exponential-gamma`` -> :class:`ExponentialGamma`: ``lam ()`` (rate); ``(n,)`` > 0;
  TruncatedSum, Sum, Mean.
* ``normal-known-variance`` -> :class:`NormalKnownVariance`: ``mu ()``; ``(n,)`` reals; Sum, Mean,
  TruncatedSum.
* ``normal-inverse-gamma`` -> :class:`NormalInverseGamma`: ``mu ()``, ``sigma2 ()``; as above.
* ``dirichlet-categorical`` -> :class:`DirichletCategorical`: ``p (k,)``; ``(n,)`` int labels;
  Histogram.
* ``naive-bayes`` -> :class:`NaiveBayesLogLinear`: ``p (I,)``, ``q1..qK`` with ``qk (I, J_k)``;
  ``(n, K+1)`` int ``[y, x_1..x_K]``; NaiveBayesCounts.
* ``linear-regression`` -> :class:`LinearRegression`: ``beta (p+1,)`` [+ ``sigma2 ()``]
  [+ ``m (p,)``, ``S (p, p)`` with ``hyperprior="niw"``]; ``(n, p+1)`` ``[x_1..x_p, y]``;
  RegressionStats.
* ``mrf`` -> :class:`CliqueMRF`: ``theta0..theta{m-1}`` (one log-potential table per clique);
  ``(n, T)`` int categories; MarginalTables.
* ``dirichlet`` -> :class:`Dirichlet`: ``alpha (D,)``; ``(n, D)`` rows on the open simplex;
  CensoredLogMean.
* ``hmm`` -> :class:`HiddenMarkovNB`: ``pi (K,)``, ``A (K, K)``, ``theta1..thetaD`` with
  ``theta_d (K, K_d)``; ``(n, 2+D)`` int ``[region, time, x_1..x_D]``; CellCounts.
"""

from privpost._lazy import lazy_package
from privpost.models import base as _base
from privpost.models.base import Model, model_from_dict, model_from_spec, query_kind, register_model

# The model classes are imported on first use (each model module imports SciPy, which costs
# about half a second at start-up): ``pp.models.LinearRegression`` imports only its module, and
# a spec lookup (``model_from_spec("linear-regression:...")``) imports only the module of that
# name. ``MODELS`` (the registry) is complete once read through this package.
# tests/test_startup_imports.py checks these tables against the modules' registrations.
_CLASSES = {
    "BetaBernoulli": "bernoulli",
    "DirichletCategorical": "categorical",
    "Dirichlet": "dirichlet",
    "ExponentialGamma": "exponential",
    "HiddenMarkovNB": "hmm",
    "LinearRegression": "linear_regression",
    "CliqueMRF": "mrf",
    "NaiveBayesLogLinear": "naive_bayes",
    "NormalInverseGamma": "normal",
    "NormalKnownVariance": "normal",
    "PoissonGamma": "poisson",
    "BernoulliLogit": "penalty_models",
    "ExponentialLog": "penalty_models",
    "LogisticRegressionBounded": "penalty_models",
    "NormalMeanBounded": "penalty_models",
    "PenaltyModel": "penalty_models",
    "PoissonLog": "penalty_models",
}
#: registry name -> module, for the registered (spec-constructible) built-in models
_base.BUILTIN_MODULES.update({
    "beta-bernoulli": "privpost.models.bernoulli",
    "dirichlet-categorical": "privpost.models.categorical",
    "dirichlet": "privpost.models.dirichlet",
    "exponential-gamma": "privpost.models.exponential",
    "hmm": "privpost.models.hmm",
    "linear-regression": "privpost.models.linear_regression",
    "mrf": "privpost.models.mrf",
    "naive-bayes": "privpost.models.naive_bayes",
    "normal-inverse-gamma": "privpost.models.normal",
    "normal-known-variance": "privpost.models.normal",
    "poisson-gamma": "privpost.models.poisson",
})

lazy_package(__name__, {**{c: (f"privpost.models.{m}", c) for c, m in _CLASSES.items()},
                        "MODELS": _base.all_models})

__all__ = [
    "MODELS",
    "Model",
    "register_model",
    "model_from_dict",
    "model_from_spec",
    "query_kind",
    "BetaBernoulli",
    "PoissonGamma",
    "ExponentialGamma",
    "NormalKnownVariance",
    "NormalInverseGamma",
    "DirichletCategorical",
    "NaiveBayesLogLinear",
    "LinearRegression",
    "Dirichlet",
    "PenaltyModel",
    "BernoulliLogit",
    "NormalMeanBounded",
    "LogisticRegressionBounded",
    "PoissonLog",
    "ExponentialLog",
    "HiddenMarkovNB",
    "CliqueMRF",
]
