"""Gamma--Poisson model: counts with a Gamma prior on the Poisson rate."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from privpost.errors import DataError
from privpost.models._gamma_rate import GammaRateModel
from privpost.models.base import as_rng, records_1d, register_model

__all__ = ["PoissonGamma"]


@register_model
class PoissonGamma(GammaRateModel):
    """``x_i | lam ~ Poisson(lam)``, ``lam ~ Gamma(shape, rate)``.

    Parameters
    ----------
    shape, rate : float > 0
        Gamma prior (shape--rate parameterisation: mean ``shape / rate``).

    Parameters of the model: ``lam`` shape ``()``.
    Records: ``(n,)`` float64 holding non-negative integers. Fits ``Sum`` (clamped counts) and
    ``TruncatedSum`` (counts outside the truncation interval dropped) and ``Mean``.
    Update: exact conjugate draw ``lam ~ Gamma(shape + sum(x), rate + n)``.
    Spec: ``"poisson-gamma:shape=2,rate=1"``.
    """

    name = "poisson-gamma"
    conjugate = True
    records_doc = "non-negative integer counts, shape (n,)"

    def simulate(self, params, n, rng):
        return as_rng(rng).poisson(float(params["lam"]), size=int(n)).astype(np.float64)

    def update(self, params, records, rng):
        return {"lam": np.float64(rng.gamma(self.shape + float(records.sum()),
                                            1.0 / (self.rate + records.shape[0])))}

    def log_likelihood(self, params, records):
        lam = float(params["lam"])
        x = np.asarray(records, dtype=np.float64)
        return x * math.log(lam) - lam - gammaln(x + 1.0)

    def nonprivate_posterior(self, records):
        """``{"shape": shape + sum(x), "rate": rate + n}`` -- the Gamma posterior of ``lam``."""
        x = self.validate_records(records)
        return {"shape": self.shape + float(x.sum()), "rate": self.rate + x.shape[0]}

    def validate_records(self, records):
        x = records_1d(self.name, records, integer=True)
        if np.any(x < 0):
            raise DataError(f"model {self.name!r}: counts must be >= 0")
        return x

    def compiled_model(self):
        """Numba versions of update/simulate for the compiled DA-MCMC driver."""
        from privpost.models import _compiled
        return _compiled.poisson_gamma(self.shape, self.rate)

    def check_query(self, query):
        self._require_kind(query, {"sum": "Sum", "mean": "Mean", "truncatedsum": "TruncatedSum"})
