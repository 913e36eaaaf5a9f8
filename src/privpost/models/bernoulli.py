"""Beta--Bernoulli model: 0/1 records with a Beta prior on the success probability."""

from __future__ import annotations

import math

import numpy as np

from privpost.models.base import Model, as_rng, positive_float, records_1d, register_model
from privpost.errors import DataError

__all__ = ["BetaBernoulli"]


@register_model
class BetaBernoulli(Model):
    """``x_i | theta ~ Bernoulli(theta)``, ``theta ~ Beta(a, b)``.

    Parameters
    ----------
    a, b : float > 0
        Beta prior shape parameters.

    Parameters of the model: ``theta`` shape ``()``.
    Records: ``(n,)`` float64 of 0.0 / 1.0. Fits ``Sum`` and ``Mean`` queries (bounds ``(0, 1)``
    are the natural choice; other bounds clamp the records inside the query, which noise-aware
    methods handle exactly).
    Update: exact conjugate draw ``theta ~ Beta(a + s, b + n - s)``, ``s = sum(x)``.
    Spec: ``"beta-bernoulli:a=1,b=1"``.
    """

    name = "beta-bernoulli"
    conjugate = True
    records_doc = "0/1 values, shape (n,)"

    def __init__(self, a: float = 1.0, b: float = 1.0):
        self.a = positive_float("a", a)
        self.b = positive_float("b", b)
        self.param_shapes = {"theta": ()}

    def hyperparameters(self):
        return {"a": self.a, "b": self.b}

    def prior_sample(self, rng):
        return {"theta": np.float64(as_rng(rng).beta(self.a, self.b))}

    def simulate(self, params, n, rng):
        return (as_rng(rng).random(int(n)) < params["theta"]).astype(np.float64)

    def update(self, params, records, rng):
        s = float(records.sum())
        n = records.shape[0]
        return {"theta": np.float64(rng.beta(self.a + s, self.b + n - s))}

    def log_likelihood(self, params, records):
        t = float(params["theta"])
        x = np.asarray(records, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            lt = math.log(t) if t > 0 else -np.inf
            l1 = math.log1p(-t) if t < 1 else -np.inf
            out = np.where(x == 1.0, lt, np.where(x == 0.0, l1, -np.inf))
        return out

    def log_prior(self, params):
        from scipy.special import betaln   # here, not at module level: start-up time

        t = float(params["theta"])
        if not 0.0 < t < 1.0:
            return -np.inf
        return (self.a - 1) * math.log(t) + (self.b - 1) * math.log1p(-t) - betaln(self.a, self.b)

    def nonprivate_posterior(self, records):
        """``{"a": a + s, "b": b + n - s}`` -- the Beta posterior of ``theta``."""
        x = self.validate_records(records)
        s = float(x.sum())
        return {"a": self.a + s, "b": self.b + x.shape[0] - s}

    def validate_records(self, records):
        x = records_1d(self.name, records)
        if not np.all((x == 0.0) | (x == 1.0)):
            raise DataError(f"model {self.name!r}: records must be 0 or 1")
        return x

    # ---------------------------------------------------------------- non-centred protocol
    # x = 1{u < theta}, u ~ U(0, 1) (θ-free); used by damcmc(interweave=...).
    interweave_params = ("theta",)

    def innovations(self, params, records, rng):
        """``u | x, theta``: ``U(0, theta)`` where ``x = 1``, ``U(theta, 1)`` where ``x = 0``
        (so that ``u ~ U(0, 1)`` independently of theta and ``x = 1{u < theta}``)."""
        t = float(params["theta"])
        x = np.asarray(records, dtype=np.float64)
        r = as_rng(rng).random(x.shape[0])
        return np.where(x == 1.0, r * t, t + r * (1.0 - t))

    def from_innovations(self, params, u):
        """Records ``x_i = 1{u_i < theta}``."""
        return (np.asarray(u) < float(params["theta"])).astype(np.float64)

    def compiled_model(self):
        """Numba versions of update/simulate for the compiled DA-MCMC driver."""
        from privpost.models import _compiled
        return _compiled.beta_bernoulli(self.a, self.b)

    def check_query(self, query):
        self._require_kind(query, {"sum": "Sum", "mean": "Mean"})

    def count_latent(self, release):
        """The 2-cell count table of 0/1 records for ``damcmc(latent="counts")`` on ``Sum`` /
        ``Mean`` releases (or a ReleaseSet of them), else ``None``
        (:func:`privpost.models._count_tables.bernoulli_table`)."""
        from privpost.models._count_tables import bernoulli_table
        return bernoulli_table(self, release, BetaBernoulli)
