"""Models for penalty MCMC (seed 001): log-likelihoods on an unconstrained scale with a *proved*
bound on how much one record can move a log-likelihood ratio.

A penalty model works on an unconstrained parameter vector ``u`` of shape ``(d,)`` and provides

``loglik(u, records) -> (n,)``
    per-record ``log p(y_i | u)``;
``log_prior(u) -> float``
    log prior density of ``u`` (the Jacobian of the transformation included);
``ratio_sensitivity(h) -> float``
    ``Δ(h) = sup |[ℓ(y, u') - ℓ(y, u)] - [ℓ(y*, u') - ℓ(y*, u)]|`` over records ``y, y*`` of the
    (bounded) data domain and pairs with ``max_i |u'_i - u_i| <= h``: the L2-sensitivity of the
    log-likelihood ratio ``d_n`` under replace-one neighbours when proposals are a box of
    half-width ``h`` (A1 of the paper). Each model derives it in its docstring and returns
    ``min(generic A2 bound, model-specific bound)``; the generic bound (A2 + A3, corrected
    constant of extract 001 §2.6) is ``2 d M h`` with ``M = sup |∂ℓ/∂u_i|``;
``to_params(u) -> dict`` / ``initial() -> (d,)``
    the model's natural parameters (names as in :mod:`privpost.models`) and a data-free start;
``expfam()`` (optional)
    ``(phi, log_g, statistic, stat_sensitivity)`` for Algorithm 3: ``log p(y|u) = log h(y) +
    log g(u) + phi(u)·S(y)`` and the L2 sensitivity of ``S_n = Σ S(y_i)`` (replace-one).

Records are clamped to the public data bounds (as the queries do); clamping is applied by
``validate_records`` before any likelihood is evaluated, so the bounds hold for every record.
``tests/test_penalty.py`` checks every ``ratio_sensitivity`` by brute force over a grid.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaln, expit, log_expit

from privpost.errors import DataError, PrivpostError
from privpost.models.base import finite_float, positive_float, positive_int, records_1d

__all__ = ["PenaltyModel", "BernoulliLogit", "NormalMeanBounded", "LogisticRegressionBounded",
           "PoissonLog", "ExponentialLog", "penalty_model", "PENALTY_MODELS"]


class PenaltyModel:
    """Base class (see the module docstring for the protocol)."""

    name = "penalty-model"
    param_name = "theta"
    dim = 1

    def grad_bound(self) -> float:
        """``M = sup_{y, u} |∂ℓ(y, u)/∂u_i|`` (``inf`` when unbounded)."""
        return math.inf

    def generic_sensitivity(self, h: float) -> float:
        """A2 + A3: ``|ℓ(y,u') - ℓ(y,u)| <= M Σ_i |u'_i - u_i| <= d M h`` for every record, so
        replacing one record changes ``d_n`` by at most ``2 d M h`` (extract 001 §2.6: the
        paper's ``2 d n^-α M`` with the missing step constant ``c`` restored, ``h = c n^-α``)."""
        return 2.0 * self.dim * self.grad_bound() * h

    def model_sensitivity(self, h: float) -> float:
        return math.inf

    def ratio_sensitivity(self, h: float) -> float:
        """The proved ``Δ(h)``: the smaller of the generic and the model-specific bound."""
        h = positive_float("step", h)
        return min(self.generic_sensitivity(h), self.model_sensitivity(h))

    def expfam(self):
        return None

    def hyperparameters(self) -> dict:
        return {}

    def to_dict(self) -> dict:
        return {"type": self.name, **self.hyperparameters()}

    def initial(self) -> np.ndarray:
        return np.zeros(self.dim)

    def to_params(self, u) -> dict:
        return {self.param_name: np.float64(u[0]) if self.dim == 1 else np.asarray(u, float)}

    def param_draws(self, u: np.ndarray) -> dict:
        """``(chains, draws, d)`` unconstrained draws -> natural parameter arrays."""
        return {self.param_name: u[..., 0] if self.dim == 1 else u}

    def validate_records(self, records) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class BernoulliLogit(PenaltyModel):
    """Bernoulli records, Beta(a, b) prior on ``theta``; penalty MCMC on ``u = logit(theta)``.

    ``ℓ(y, u) = y u - log(1 + e^u)``, ``∂ℓ/∂u = y - expit(u) ∈ (-1, 1)``, so ``M = 1`` and the
    generic bound is ``2h``. Model-specific: ``ℓ(1, u) - ℓ(0, u) = u``, so the change of a
    record's ratio when ``y`` is replaced is ``|(u' - u)(y - y*)| <= h``: ``Δ(h) = h``.
    Prior on ``u``: ``theta^a (1 - theta)^b / B(a, b)`` (Beta density times the Jacobian).
    Exponential family (Algorithm 3): ``phi(u) = u``, ``log g(u) = -log(1 + e^u)``,
    ``S(y) = y``, sensitivity of ``S_n``: 1.
    Records ``(n,)`` of 0/1 (other values are a DataError).
    """

    name = "bernoulli-logit"
    param_name = "theta"
    dim = 1

    def __init__(self, a: float = 1.0, b: float = 1.0):
        self.a = positive_float("a", a)
        self.b = positive_float("b", b)
        self._lbeta = float(betaln(self.a, self.b))

    def hyperparameters(self):
        return {"a": self.a, "b": self.b}

    def grad_bound(self):
        return 1.0

    def model_sensitivity(self, h):
        return h

    def loglik(self, u, x):
        return x * u[0] + log_expit(-u[0])

    def log_prior(self, u):
        return float(self.a * log_expit(u[0]) + self.b * log_expit(-u[0])) - self._lbeta

    def to_params(self, u):
        return {"theta": np.float64(expit(u[0]))}

    def posterior_logit_moments(self, records):
        """Exact mean and variance of ``logit(theta)`` under the non-private Beta posterior:
        ``psi(a + s) - psi(b + n - s)`` and ``psi1(a + s) + psi1(b + n - s)``."""
        from scipy.special import polygamma, psi
        x = self.validate_records(records)
        s, n = float(x.sum()), x.shape[0]
        A, B = self.a + s, self.b + n - s
        return float(psi(A) - psi(B)), float(polygamma(1, A) + polygamma(1, B))

    def param_draws(self, u):
        return {"theta": expit(u[..., 0])}

    def initial(self):
        return np.array([math.log(self.a / self.b)])

    def expfam(self):
        return (lambda u: np.array([u[0]]), lambda u: float(log_expit(-u[0])),
                lambda x: x[:, None], 1.0)

    def validate_records(self, records):
        x = records_1d(self.name, records)
        if not np.all((x == 0.0) | (x == 1.0)):
            raise DataError(f"model {self.name!r}: records must be 0 or 1")
        return x


class NormalMeanBounded(PenaltyModel):
    """``y ~ N(mu, sigma^2)`` with known ``sigma``, ``mu ~ N(mu0, tau0^2)``, records clamped to
    the public ``bounds = (lo, hi)``.

    ``ℓ(y, mu') - ℓ(y, mu) = (mu' - mu)(2y - mu - mu') / (2 sigma^2)``; replacing ``y`` by ``y*``
    changes it by ``(mu' - mu)(y - y*)/sigma^2``, so ``Δ(h) = h (hi - lo) / sigma^2`` for every
    ``mu`` (``M`` itself is unbounded on the real line, so the generic bound is ``inf``).
    Exponential family: ``phi(mu) = mu / sigma^2``, ``log g(mu) = -mu^2 / (2 sigma^2)``,
    ``S(y) = y``, sensitivity ``hi - lo``.
    """

    name = "normal-mean-bounded"
    param_name = "mu"
    dim = 1

    def __init__(self, mu0: float = 0.0, tau0: float = 1.0, sigma: float = 1.0,
                 bounds=(-3.0, 3.0)):
        self.mu0 = finite_float("mu0", mu0)
        self.tau0 = positive_float("tau0", tau0)
        self.sigma = positive_float("sigma", sigma)
        try:
            lo, hi = (finite_float("bounds", v) for v in bounds)
        except (TypeError, ValueError):
            raise PrivpostError(f"bounds must be two numbers (lo, hi), got {bounds!r}") from None
        if not lo < hi:
            raise PrivpostError(f"bounds must satisfy lo < hi, got {bounds!r}")
        self.bounds = (lo, hi)

    def hyperparameters(self):
        return {"mu0": self.mu0, "tau0": self.tau0, "sigma": self.sigma,
                "bounds": list(self.bounds)}

    def model_sensitivity(self, h):
        return h * (self.bounds[1] - self.bounds[0]) / self.sigma ** 2

    def loglik(self, u, x):
        z = (x - u[0]) / self.sigma
        return -0.5 * z * z - math.log(self.sigma) - 0.5 * math.log(2 * math.pi)

    def log_prior(self, u):
        z = (u[0] - self.mu0) / self.tau0
        return float(-0.5 * z * z - math.log(self.tau0) - 0.5 * math.log(2 * math.pi))

    def initial(self):
        return np.array([self.mu0])

    def expfam(self):
        s2 = self.sigma ** 2
        return (lambda u: np.array([u[0] / s2]), lambda u: float(-u[0] ** 2 / (2 * s2)),
                lambda x: x[:, None], self.bounds[1] - self.bounds[0])

    def validate_records(self, records):
        return np.clip(records_1d(self.name, records), *self.bounds)


class LogisticRegressionBounded(PenaltyModel):
    """``P(y = 1 | x) = expit(beta_0 + x·beta_{1:p})``, ``beta ~ N(0, prior_sd^2 I)``; covariates
    clamped to ``[-bound, bound]``. Records ``(n, p + 1)``: ``[x_1..x_p, y]``, ``y`` in {0, 1}.

    ``ℓ = y η - log(1 + e^η)``, ``η = z·beta`` with ``z = (1, x)``; ``∂ℓ/∂beta_i = (y - expit(η))
    z_i``, so ``M = max(1, bound)`` and the generic bound is ``2 (p + 1) M h``. Model-specific:
    ``|ℓ(y, beta') - ℓ(y, beta)| <= |z·(beta' - beta)| <= ||z||_1 h <= (1 + p bound) h`` (the
    derivative of ``ℓ`` in ``η`` is in (-1, 1)), so ``Δ(h) = 2 (1 + p bound) h``.
    """

    name = "logistic-regression-bounded"
    param_name = "beta"

    def __init__(self, p: int = 1, prior_sd: float = 2.5, bound: float = 1.0):
        self.p = positive_int("p", p)
        self.prior_sd = positive_float("prior_sd", prior_sd)
        self.bound = positive_float("bound", bound)
        self.dim = self.p + 1

    def hyperparameters(self):
        return {"p": self.p, "prior_sd": self.prior_sd, "bound": self.bound}

    def grad_bound(self):
        return max(1.0, self.bound)

    def model_sensitivity(self, h):
        return 2.0 * (1.0 + self.p * self.bound) * h

    def loglik(self, u, rec):
        eta = u[0] + rec[:, :-1] @ u[1:]
        y = rec[:, -1]
        return y * eta + log_expit(-eta)

    def log_prior(self, u):
        z = np.asarray(u) / self.prior_sd
        return float(-0.5 * z @ z - self.dim * (math.log(self.prior_sd)
                                                + 0.5 * math.log(2 * math.pi)))

    def to_params(self, u):
        return {"beta": np.asarray(u, float)}

    def validate_records(self, records):
        try:
            r = np.array(records, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(f"model {self.name!r}: records must be numbers") from None
        if r.ndim != 2 or r.shape[1] != self.p + 1:
            raise DataError(f"model {self.name!r}: records must have shape (n, {self.p + 1}) "
                            f"= [x_1..x_{self.p}, y], got {r.shape}")
        if not np.all(np.isfinite(r)):
            raise DataError(f"model {self.name!r}: records contain NaN or infinite values")
        if not np.all((r[:, -1] == 0) | (r[:, -1] == 1)):
            raise DataError(f"model {self.name!r}: the last column y must be 0 or 1")
        r[:, :-1] = np.clip(r[:, :-1], -self.bound, self.bound)
        return r


class _GammaRateLog(PenaltyModel):
    """Shared part of the Gamma-prior rate models on ``u = log(lam)``: prior
    ``lam ~ Gamma(shape, rate)`` gives ``log p(u) = shape u - rate e^u + shape log(rate) -
    lgamma(shape)`` (the Jacobian ``e^u`` included); records clamped to ``[0, upper]``."""

    param_name = "lam"
    dim = 1

    def __init__(self, shape: float = 1.0, rate: float = 1.0, upper: float = 10.0):
        from scipy.special import gammaln
        self.shape = positive_float("shape", shape)
        self.rate = positive_float("rate", rate)
        self.upper = positive_float("upper", upper)
        self._c = self.shape * math.log(self.rate) - float(gammaln(self.shape))

    def hyperparameters(self):
        return {"shape": self.shape, "rate": self.rate, "upper": self.upper}

    def log_prior(self, u):
        return float(self.shape * u[0] - self.rate * math.exp(u[0])) + self._c

    def to_params(self, u):
        return {"lam": np.float64(math.exp(u[0]))}

    def param_draws(self, u):
        return {"lam": np.exp(u[..., 0])}

    def initial(self):
        return np.array([math.log(self.shape / self.rate)])

    def posterior_log_moments(self, records):
        """Exact mean and variance of ``log(lam)`` under the non-private Gamma(A, B) posterior:
        ``psi(A) - log B`` and ``psi1(A)``."""
        from scipy.special import polygamma, psi
        A, B = self._posterior(self.validate_records(records))
        return float(psi(A) - math.log(B)), float(polygamma(1, A))


class PoissonLog(_GammaRateLog):
    """Poisson counts (clamped to ``{0..upper}``), ``lam ~ Gamma(shape, rate)``, on
    ``u = log(lam)``.

    ``ℓ(y, u) = y u - e^u - log y!``; replacing ``y`` by ``y*`` changes the ratio
    ``ℓ(y, u') - ℓ(y, u)`` by ``(u' - u)(y - y*)``, so ``Δ(h) = upper h`` for every ``u``
    (``M`` is unbounded because of ``e^u``). Exponential family: ``phi(u) = u``,
    ``log g(u) = -e^u``, ``S(y) = y``, sensitivity ``upper``.
    """

    name = "poisson-log"

    def model_sensitivity(self, h):
        return self.upper * h

    def loglik(self, u, x):
        from scipy.special import gammaln
        return x * u[0] - math.exp(u[0]) - gammaln(x + 1.0)

    def expfam(self):
        return (lambda u: np.array([u[0]]), lambda u: -math.exp(u[0]),
                lambda x: x[:, None], self.upper)

    def _posterior(self, x):
        return self.shape + float(x.sum()), self.rate + x.shape[0]

    def validate_records(self, records):
        x = records_1d(self.name, records)
        if np.any(x < 0) or np.any(x != np.round(x)):
            raise DataError(f"model {self.name!r}: records must be non-negative integers")
        return np.minimum(x, math.floor(self.upper))


class ExponentialLog(_GammaRateLog):
    """Exponential durations with rate ``lam`` (records clamped to ``[0, upper]``),
    ``lam ~ Gamma(shape, rate)``, on ``u = log(lam)``. **Exponential-family variant only.**

    ``ℓ(y, u) = u - e^u y``: the ratio changes by ``(e^{u'} - e^u)(y - y*)`` when ``y`` is
    replaced, which is unbounded in ``u``, so the general variant needs ``clip=``. Algorithm 3
    releases ``S_n = Σ y_i`` with sensitivity ``upper`` and needs no ratio bound:
    ``phi(u) = -e^u``, ``log g(u) = u``, ``S(y) = y``.
    """

    name = "exponential-log"

    def loglik(self, u, x):
        return u[0] - math.exp(u[0]) * x

    def expfam(self):
        return (lambda u: np.array([-math.exp(u[0])]), lambda u: float(u[0]),
                lambda x: x[:, None], self.upper)

    def _posterior(self, x):
        return self.shape + x.shape[0], self.rate + float(x.sum())

    def validate_records(self, records):
        x = records_1d(self.name, records)
        if np.any(x < 0):
            raise DataError(f"model {self.name!r}: records must be >= 0")
        return np.minimum(x, self.upper)


PENALTY_MODELS = {c.name: c for c in (BernoulliLogit, NormalMeanBounded,
                                      LogisticRegressionBounded, PoissonLog, ExponentialLog)}


def penalty_model(model, *, bounds=None) -> PenaltyModel:
    """A :class:`PenaltyModel` for ``model``: a PenaltyModel is returned as is; a
    :class:`~privpost.models.BetaBernoulli` becomes :class:`BernoulliLogit`, a
    :class:`~privpost.models.NormalKnownVariance` becomes :class:`NormalMeanBounded`,
    :class:`~privpost.models.PoissonGamma` :class:`PoissonLog` and
    :class:`~privpost.models.ExponentialGamma` :class:`ExponentialLog` (these need the public
    data ``bounds``); a spec string ``"name:key=value,..."`` names one of
    :data:`PENALTY_MODELS` or a privpost model."""
    from privpost.models import (BetaBernoulli, ExponentialGamma, NormalKnownVariance,
                                 PoissonGamma, model_from_spec)

    if isinstance(model, PenaltyModel):
        return model
    if isinstance(model, str):
        name, _, rest = model.partition(":")
        if name.strip() in PENALTY_MODELS:
            kwargs = {}
            for item in filter(None, (s.strip() for s in rest.split(","))):
                key, eq, value = item.partition("=")
                if not eq:
                    raise PrivpostError(f"model spec {model!r}: expected key=value, got {item!r}")
                kwargs[key.strip()] = _spec_value(value.strip())
            if name.strip() == "normal-mean-bounded" and "lo" in kwargs:
                kwargs["bounds"] = (kwargs.pop("lo"), kwargs.pop("hi", None))
            try:
                return PENALTY_MODELS[name.strip()](**kwargs)
            except TypeError as exc:
                raise PrivpostError(f"model spec {model!r}: {exc}") from None
        model = model_from_spec(model)
    if isinstance(model, BetaBernoulli):
        return BernoulliLogit(model.a, model.b)
    if isinstance(model, (PoissonGamma, ExponentialGamma)):
        if bounds is None:
            raise PrivpostError(f"penalty MCMC for {model.name} needs the public data bounds: "
                                "pass bounds=(0, upper) (command line: --bounds 0,UPPER)")
        cls = PoissonLog if isinstance(model, PoissonGamma) else ExponentialLog
        return cls(model.shape, model.rate, float(bounds[1]))
    if isinstance(model, NormalKnownVariance):
        if bounds is None:
            raise PrivpostError("penalty MCMC for normal-known-variance needs the public data "
                                "bounds: pass bounds=(lo, hi) (command line: --bounds LO,HI)")
        return NormalMeanBounded(model.mu0, model.tau0, model.sigma, bounds)
    raise PrivpostError(
        f"penalty MCMC has no proved sensitivity for {type(model).__name__}; use one of "
        f"{sorted(PENALTY_MODELS)}, beta-bernoulli, normal-known-variance, or a PenaltyModel "
        "subclass (with clip= if it has no bound)")


def _spec_value(text: str):
    try:
        v = float(text)
    except ValueError:
        raise PrivpostError(f"model spec: {text!r} is not a number") from None
    return int(v) if v.is_integer() and "." not in text and "e" not in text.lower() else v
