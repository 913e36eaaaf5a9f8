"""Normal models for real-valued scalar records: known variance, and normal--inverse-gamma."""

from __future__ import annotations

import math

import numpy as np

from privpost.models.base import (Model, as_rng, finite_float, positive_float, records_1d,
                                  register_model)

__all__ = ["NormalKnownVariance", "NormalInverseGamma"]

_LOG_2PI = math.log(2.0 * math.pi)
_SCALAR_QUERIES = {"sum": "Sum", "mean": "Mean", "truncatedsum": "TruncatedSum"}


@register_model
class NormalKnownVariance(Model):
    """``x_i | mu ~ N(mu, sigma^2)`` with ``sigma`` known, ``mu ~ N(mu0, tau0^2)``.

    Parameters
    ----------
    mu0 : float
        Prior mean of ``mu``.
    tau0 : float > 0
        Prior **standard deviation** of ``mu``.
    sigma : float > 0
        Known **standard deviation** of a record.

    Parameters of the model: ``mu`` shape ``()``.
    Records: ``(n,)`` float64. Fits ``Sum`` / ``Mean`` (records clamped to the query bounds inside
    the query) and ``TruncatedSum``.
    Update: exact conjugate draw, precision ``1/tau0^2 + n/sigma^2``.
    Spec: ``"normal-known-variance:mu0=0,tau0=10,sigma=1"``.
    """

    name = "normal-known-variance"
    conjugate = True
    records_doc = "real values, shape (n,)"

    def __init__(self, mu0: float = 0.0, tau0: float = 1.0, sigma: float = 1.0):
        self.mu0 = finite_float("mu0", mu0)
        self.tau0 = positive_float("tau0", tau0)
        self.sigma = positive_float("sigma", sigma)
        self._prec0 = 1.0 / self.tau0 ** 2
        self._inv_s2 = 1.0 / self.sigma ** 2
        self.param_shapes = {"mu": ()}

    def hyperparameters(self):
        return {"mu0": self.mu0, "tau0": self.tau0, "sigma": self.sigma}

    def prior_sample(self, rng):
        return {"mu": np.float64(self.mu0 + self.tau0 * as_rng(rng).standard_normal())}

    def simulate(self, params, n, rng):
        return float(params["mu"]) + self.sigma * as_rng(rng).standard_normal(int(n))

    def _posterior(self, total, n):
        prec = self._prec0 + n * self._inv_s2
        mean = (self.mu0 * self._prec0 + total * self._inv_s2) / prec
        return mean, 1.0 / math.sqrt(prec)

    def update(self, params, records, rng):
        mean, sd = self._posterior(float(records.sum()), records.shape[0])
        return {"mu": np.float64(mean + sd * rng.standard_normal())}

    def log_likelihood(self, params, records):
        z = (np.asarray(records, dtype=np.float64) - float(params["mu"])) / self.sigma
        return -0.5 * z * z - math.log(self.sigma) - 0.5 * _LOG_2PI

    def log_prior(self, params):
        z = (float(params["mu"]) - self.mu0) / self.tau0
        return -0.5 * z * z - math.log(self.tau0) - 0.5 * _LOG_2PI

    def nonprivate_posterior(self, records):
        """``{"mu0": mean, "tau0": sd}`` -- the normal posterior of ``mu``."""
        x = self.validate_records(records)
        mean, sd = self._posterior(float(x.sum()), x.shape[0])
        return {"mu0": mean, "tau0": sd}

    def validate_records(self, records):
        return records_1d(self.name, records)

    def compiled_model(self):
        """Numba versions of update/simulate for the compiled DA-MCMC driver."""
        from privpost.models import _compiled
        return _compiled.normal_known_variance(self.mu0, self.tau0, self.sigma)

    # ---------------------------------------------------------------- non-centred protocol
    # x = mu + sigma u with u ~ N(0, 1) (mu-free); used by damcmc's interweaving move.
    interweave_params = ("mu",)

    def innovations(self, params, records, rng=None):
        """``u = (x - mu) / sigma`` (deterministic; ``rng`` unused), shape ``(n,)``."""
        return (np.asarray(records, dtype=np.float64) - float(params["mu"])) / self.sigma

    def from_innovations(self, params, u):
        """Records ``x = mu + sigma u``, shape ``(n,)``."""
        return float(params["mu"]) + self.sigma * np.asarray(u, dtype=np.float64)

    def check_query(self, query):
        self._require_kind(query, _SCALAR_QUERIES)


@register_model
class NormalInverseGamma(Model):
    """``x_i | mu, sigma2 ~ N(mu, sigma2)``, ``mu | sigma2 ~ N(mu0, sigma2 / kappa0)``,
    ``sigma2 ~ InvGamma(alpha0, beta0)`` (shape ``alpha0``, scale ``beta0``).

    Parameters
    ----------
    mu0 : float
    kappa0, alpha0, beta0 : float > 0

    Parameters of the model: ``mu`` shape ``()``, ``sigma2`` shape ``()`` (a variance).
    Records: ``(n,)`` float64. Fits ``Sum`` / ``Mean`` (clamped) and ``TruncatedSum``; a sum
    alone carries little information about ``sigma2``.
    Update: exact joint conjugate draw (``sigma2`` from its marginal posterior, then ``mu``).
    Spec: ``"normal-inverse-gamma:mu0=0,kappa0=1,alpha0=2,beta0=2"``.
    """

    name = "normal-inverse-gamma"
    conjugate = True
    records_doc = "real values, shape (n,)"

    def __init__(self, mu0: float = 0.0, kappa0: float = 1.0, alpha0: float = 2.0,
                 beta0: float = 2.0):
        self.mu0 = finite_float("mu0", mu0)
        self.kappa0 = positive_float("kappa0", kappa0)
        self.alpha0 = positive_float("alpha0", alpha0)
        self.beta0 = positive_float("beta0", beta0)
        self.param_shapes = {"mu": (), "sigma2": ()}

    def hyperparameters(self):
        return {"mu0": self.mu0, "kappa0": self.kappa0, "alpha0": self.alpha0,
                "beta0": self.beta0}

    def prior_sample(self, rng):
        rng = as_rng(rng)
        sigma2 = self.beta0 / rng.standard_gamma(self.alpha0)
        mu = self.mu0 + math.sqrt(sigma2 / self.kappa0) * rng.standard_normal()
        return {"mu": np.float64(mu), "sigma2": np.float64(sigma2)}

    def simulate(self, params, n, rng):
        return float(params["mu"]) + math.sqrt(float(params["sigma2"])) * \
            as_rng(rng).standard_normal(int(n))

    def _posterior(self, x):
        n = x.shape[0]
        kn = self.kappa0 + n
        if n == 0:
            return self.mu0, self.kappa0, self.alpha0, self.beta0
        xbar = float(x.sum()) / n
        d = x - xbar
        ss = float(d @ d)
        mun = (self.kappa0 * self.mu0 + n * xbar) / kn
        bn = self.beta0 + 0.5 * ss + 0.5 * self.kappa0 * n * (xbar - self.mu0) ** 2 / kn
        return mun, kn, self.alpha0 + 0.5 * n, bn

    def update(self, params, records, rng):
        mun, kn, an, bn = self._posterior(records)
        sigma2 = bn / rng.standard_gamma(an)
        mu = mun + math.sqrt(sigma2 / kn) * rng.standard_normal()
        return {"mu": np.float64(mu), "sigma2": np.float64(sigma2)}

    def log_likelihood(self, params, records):
        s2 = float(params["sigma2"])
        d = np.asarray(records, dtype=np.float64) - float(params["mu"])
        return -0.5 * d * d / s2 - 0.5 * math.log(s2) - 0.5 * _LOG_2PI

    def log_prior(self, params):
        s2 = float(params["sigma2"])
        if not s2 > 0:
            return -np.inf
        d = float(params["mu"]) - self.mu0
        lp_mu = -0.5 * self.kappa0 * d * d / s2 - 0.5 * math.log(s2 / self.kappa0) - 0.5 * _LOG_2PI
        lp_s2 = (self.alpha0 * math.log(self.beta0) - math.lgamma(self.alpha0)
                 - (self.alpha0 + 1) * math.log(s2) - self.beta0 / s2)
        return lp_mu + lp_s2

    def nonprivate_posterior(self, records):
        """``{"mu0": mu_n, "kappa0": kappa_n, "alpha0": alpha_n, "beta0": beta_n}``:
        the posterior is ``NormalInverseGamma(**result)``."""
        mun, kn, an, bn = self._posterior(self.validate_records(records))
        return {"mu0": mun, "kappa0": kn, "alpha0": an, "beta0": bn}

    def validate_records(self, records):
        return records_1d(self.name, records)

    def compiled_model(self):
        """Numba versions of update/simulate for the compiled DA-MCMC driver."""
        from privpost.models import _compiled
        return _compiled.normal_inverse_gamma(self.mu0, self.kappa0, self.alpha0, self.beta0)

    # ---------------------------------------------------------------- non-centred protocol
    # x = mu + sqrt(sigma2) u with u ~ N(0, 1) free of (mu, sigma2): the interweaving move of
    # damcmc shifts and scales all records together (a random walk on (mu, sigma2); proposals
    # with sigma2 <= 0 have log_prior -inf and are rejected).
    interweave_params = ("mu", "sigma2")

    def innovations(self, params, records, rng=None):
        """``u = (x - mu) / sqrt(sigma2)`` (deterministic; ``rng`` unused), shape ``(n,)``."""
        return ((np.asarray(records, dtype=np.float64) - float(params["mu"]))
                / math.sqrt(float(params["sigma2"])))

    def from_innovations(self, params, u):
        """Records ``x = mu + sqrt(sigma2) u``, shape ``(n,)``."""
        return float(params["mu"]) + math.sqrt(float(params["sigma2"])) * \
            np.asarray(u, dtype=np.float64)

    def check_query(self, query):
        self._require_kind(query, _SCALAR_QUERIES)
