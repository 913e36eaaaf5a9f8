"""Gamma--exponential model: positive durations with a Gamma prior on the exponential rate."""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import DataError
from privpost.models._gamma_rate import GammaRateModel
from privpost.models.base import as_rng, records_1d, register_model

__all__ = ["ExponentialGamma"]


@register_model
class ExponentialGamma(GammaRateModel):
    """``x_i | lam ~ Exponential(rate=lam)``, ``lam ~ Gamma(shape, rate)``.

    Parameters
    ----------
    shape, rate : float > 0
        Gamma prior on the exponential *rate* ``lam`` (shape--rate parameterisation).

    Parameters of the model: ``lam`` shape ``()`` (the rate; mean of a record is ``1/lam``).
    Records: ``(n,)`` float64, positive. Fits ``TruncatedSum`` (seed 003 Sec. 4.3: records outside
    ``[a, b]`` dropped, the rest summed), ``Sum`` (clamped) and ``Mean``.
    Update: exact conjugate draw ``lam ~ Gamma(shape + n, rate + sum(x))``.
    Spec: ``"exponential-gamma:shape=8,rate=2"``.
    """

    name = "exponential-gamma"
    conjugate = True
    records_doc = "positive reals, shape (n,)"

    def simulate(self, params, n, rng):
        return as_rng(rng).standard_exponential(int(n)) / float(params["lam"])

    def update(self, params, records, rng):
        return {"lam": np.float64(rng.gamma(self.shape + records.shape[0],
                                            1.0 / (self.rate + float(records.sum()))))}

    def log_likelihood(self, params, records):
        lam = float(params["lam"])
        x = np.asarray(records, dtype=np.float64)
        return np.where(x >= 0, math.log(lam) - lam * x, -np.inf)

    def nonprivate_posterior(self, records):
        """``{"shape": shape + n, "rate": rate + sum(x)}`` -- the Gamma posterior of ``lam``."""
        x = self.validate_records(records)
        return {"shape": self.shape + x.shape[0], "rate": self.rate + float(x.sum())}

    def validate_records(self, records):
        x = records_1d(self.name, records)
        if np.any(x < 0):
            raise DataError(f"model {self.name!r}: records must be >= 0")
        return x

    def compiled_model(self):
        """Numba versions of update/simulate for the compiled DA-MCMC driver."""
        from privpost.models import _compiled
        return _compiled.exponential_gamma(self.shape, self.rate)

    # ---------------------------------------------------------------- non-centred protocol
    # x = u / lam with u ~ Exponential(1) (lam-free); used by damcmc's interweaving move, which
    # rescales all records together (proposals lam <= 0 have log_prior -inf and are rejected).
    interweave_params = ("lam",)

    def innovations(self, params, records, rng=None):
        """``u = lam x`` (deterministic; ``rng`` unused), shape ``(n,)``."""
        return float(params["lam"]) * np.asarray(records, dtype=np.float64)

    def from_innovations(self, params, u):
        """Records ``x = u / lam``, shape ``(n,)``."""
        return np.asarray(u, dtype=np.float64) / float(params["lam"])

    def check_query(self, query):
        self._require_kind(query, {"truncatedsum": "TruncatedSum", "sum": "Sum", "mean": "Mean"})
