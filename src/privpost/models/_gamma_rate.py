"""The part shared by the models whose single parameter is a rate with a Gamma prior."""

from __future__ import annotations

import math

import numpy as np

from privpost.models.base import Model, as_rng, positive_float


class GammaRateModel(Model):
    """Base of :class:`ExponentialGamma` and :class:`PoissonGamma`.

    Hyperparameters ``shape, rate > 0`` of the prior ``lam ~ Gamma(shape, rate)`` (shape--rate
    parameterisation, mean ``shape / rate``); one parameter ``lam`` of shape ``()``. Subclasses
    give the record law (``simulate``, ``log_likelihood``, ``update``, ...).
    """

    def __init__(self, shape: float = 1.0, rate: float = 1.0):
        self.shape = positive_float("shape", shape)
        self.rate = positive_float("rate", rate)
        self.param_shapes = {"lam": ()}

    def hyperparameters(self):
        return {"shape": self.shape, "rate": self.rate}

    def prior_sample(self, rng):
        return {"lam": np.float64(as_rng(rng).gamma(self.shape, 1.0 / self.rate))}

    def log_prior(self, params):
        lam = float(params["lam"])
        if not lam > 0:
            return -np.inf
        return (self.shape * math.log(self.rate) - math.lgamma(self.shape)
                + (self.shape - 1) * math.log(lam) - self.rate * lam)
