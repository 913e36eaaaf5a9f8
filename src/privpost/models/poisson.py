"""Gamma--Poisson model: counts with a Gamma prior on the Poisson rate."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, ndtri, pdtr, pdtrc

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

    # ---------------------------------------------------------------- non-centred protocol
    # Randomised innovations (the records are discrete): with F(k) = P(X <= k | lam) and
    # S(k) = P(X > k | lam) = 1 - F(k), u | x, lam ~ U(F(x - 1), F(x)) is U(0, 1) whatever lam,
    # and x = g(lam, u) = min{k : F(k) >= u}. So that a record in the upper tail keeps its
    # resolution (1 - u would round to 0 near 1), u is *encoded*: a value in (0, 1] is u itself
    # (lower tail, F(x - 1) < 1/2), a value -w in [-1/2, 0) stands for u = 1 - w (upper tail),
    # and then g(lam, u) = min{k : S(k) <= w}. Both branches use the same pdtr / pdtrc as
    # innovations, so from_innovations(innovations(x)) == x exactly, boundaries included.
    interweave_params = ("lam",)

    def innovations(self, params, records, rng=None):
        """Encoded ``u ~ U(F(x - 1), F(x))`` for records ``x`` shape ``(n,)``; returns ``(n,)``.

        Needs ``P(X = x | lam)`` above the float64 underflow (~1e-300), true of every record
        the sampler holds (the centred update draws ``lam`` given them).
        """
        lam = float(params["lam"])
        x = np.asarray(records, dtype=np.float64)
        v = 1.0 - as_rng(rng).random(x.shape[0])            # U(0, 1]
        F_lo = np.where(x >= 1, pdtr(np.maximum(x - 1.0, 0.0), lam), 0.0)   # F(x - 1)
        lower = F_lo < 0.5
        # lower tail: u in (F(x-1), F(x)]
        F_hi = pdtr(x, lam)
        u = np.minimum(F_lo + v * (F_hi - F_lo), F_hi)
        u = np.where(u > F_lo, u, F_hi)
        # upper tail: w = 1 - u in [S(x), S(x-1)), S(x-1) = 1 - F(x-1) <= 1/2
        S_lo = np.where(x >= 1, pdtrc(np.maximum(x - 1.0, 0.0), lam), 1.0)  # S(x - 1)
        S_hi = pdtrc(x, lam)                                                # S(x)
        w = np.maximum(S_lo - v * (S_lo - S_hi), S_hi)
        w = np.where(w < S_lo, w, S_hi)
        return np.where(lower, u, -w)

    def from_innovations(self, params, u):
        """Records ``x = g(lam, u)`` shape ``(n,)`` (float64 counts) from encoded ``u``."""
        lam = float(params["lam"])
        u = np.asarray(u, dtype=np.float64)
        lower = u > 0
        ul = np.where(lower, u, 0.5)
        wu = np.where(lower, 0.5, -u)
        # first guess: Cornish--Fisher, k ~ lam + sqrt(lam) z + (z^2 - 1) / 6, z the normal
        # quantile of u (a ufunc: scipy.stats' ppf costs ~100x more per call)
        z = np.where(lower, ndtri(np.minimum(ul, 1.0 - 1e-16)), -ndtri(wu))
        k = np.floor(lam + math.sqrt(lam) * z + (z * z - 1.0) / 6.0 + 0.5)
        k = np.where(np.isfinite(k), np.clip(k, 0.0, 1e15), 0.0)

        def above(kk):      # is g(lam, u) <= kk ?  (F(kk) >= u, resp. S(kk) <= w)
            return np.where(lower, pdtr(kk, lam) >= ul, pdtrc(kk, lam) <= wu)

        # correct the guess against the very pdtr / pdtrc that innovations used
        for _ in range(64):
            up = ~above(k)
            down = (k >= 1) & above(np.maximum(k - 1.0, 0.0))
            if not (up.any() or down.any()):
                return k
            k = k + up - down
        # fallback (guess far off): bisection on [0, hi] with above(hi) true
        hi = np.full(k.shape, max(2.0 * lam, 16.0))
        while not np.all(above(hi)):
            hi = np.where(above(hi), hi, 2.0 * hi)
        lo = np.full(k.shape, -1.0)        # above(-1) is false: F(-1) = 0 < u, S(-1) = 1 > w
        while np.any(hi - lo > 1):
            mid = np.floor((lo + hi) / 2)
            ok = above(np.maximum(mid, 0.0)) & (mid >= 0)
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
        return hi
