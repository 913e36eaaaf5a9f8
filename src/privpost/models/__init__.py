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

from privpost.models.base import (MODELS, Model, model_from_dict, model_from_spec, query_kind,
                                  register_model)
from privpost.models.bernoulli import BetaBernoulli
from privpost.models.categorical import DirichletCategorical
from privpost.models.dirichlet import Dirichlet
from privpost.models.exponential import ExponentialGamma
from privpost.models.hmm import HiddenMarkovNB
from privpost.models.linear_regression import LinearRegression
from privpost.models.mrf import CliqueMRF
from privpost.models.naive_bayes import NaiveBayesLogLinear
from privpost.models.normal import NormalInverseGamma, NormalKnownVariance
from privpost.models.poisson import PoissonGamma
from privpost.models.penalty_models import (BernoulliLogit, ExponentialLog,
                                            LogisticRegressionBounded, NormalMeanBounded,
                                            PenaltyModel, PoissonLog)

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
