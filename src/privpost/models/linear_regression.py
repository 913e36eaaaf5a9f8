"""Bayesian linear regression with a model for the (private, hence latent) covariates.

Seed 000 Sec. 3.2 / 5 (known noise variance, ``beta ~ N(0, tau^2 I)``, covariates ``N(m, Sigma)``
with ``m, Sigma`` fixed) and seed 003 ch. 5 (normal--inverse-gamma prior, covariates with a
normal--inverse-Wishart hyperprior updated from the latent covariates).
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import DataError, PrivpostError
from privpost.models.base import (Model, as_rng, finite_float, float_array, positive_float,
                                  positive_int, query_attr, register_model, spd_matrix)

__all__ = ["LinearRegression", "regression_p", "COVARIATE_NOTE", "COVARIATE_UNUSED"]

#: how every posterior note on the covariate law starts (:meth:`LinearRegression.covariate_note`;
#: one such note per posterior)
COVARIATE_NOTE = "covariate model: "
#: ... and how it starts when the method does not use the law (then followed by the method)
COVARIATE_UNUSED = COVARIATE_NOTE + "not used by "

_LOG_2PI = math.log(2.0 * math.pi)
_numeric = None


def _kernels():
    """The compiled kernels (imports Numba on first use)."""
    global _numeric
    if _numeric is None:
        from privpost.models import _numeric as mod
        _numeric = mod
    return _numeric


def regression_p(query):
    """Number of covariates ``p`` of a RegressionStats-like query, or None if it does not say."""
    v = query_attr(query, "p", "n_covariates", "n_predictors")
    if v is not None:
        return int(v)
    bx = query_attr(query, "bounds_x")
    if bx is not None:
        arr = np.asarray(bx, dtype=object)
        if arr.ndim == 2 and arr.shape[1] == 2:
            return int(arr.shape[0])
    cols = query_attr(query, "columns")
    if cols is not None and len(cols) >= 2:
        return len(cols) - 1
    return None


@register_model
class LinearRegression(Model):
    """``y_i = beta_0 + x_i^T beta_{1:p} + e_i``, ``e_i ~ N(0, sigma2)``, covariates
    ``x_i ~ N_p(m, S)``.

    Records: ``(n, p+1)`` float64, columns ``[x_1, ..., x_p, y]`` on the **original (unclamped)
    scale**; the intercept is implicit (``beta[0]``). Fits ``RegressionStats`` with the same ``p``.

    Parameters
    ----------
    p : int >= 1
        Number of covariates (excluding the intercept).
    sigma2 : float > 0 or None
        Known noise variance; ``None`` makes ``sigma2`` a parameter with an inverse-gamma prior.
    tau2 : float > 0, default 4.0
        Prior variance of each coefficient: ``beta ~ N(beta0, tau2 I)`` (seed 000 uses 4).
    beta0 : (p+1,) floats, optional
        Prior mean of ``beta`` (default 0).
    beta_cov : (p+1, p+1) SPD matrix, optional
        Full prior covariance of ``beta`` (replaces ``tau2 I``).
    a0, b0 : float > 0, default 2.0
        ``sigma2 ~ InvGamma(a0, b0)`` (shape, scale) when ``sigma2`` is None.
    prior : {"conjugate", "independent"}, default "conjugate"
        Only when ``sigma2`` is None. ``"conjugate"`` is the normal--inverse-gamma prior of seed
        003: ``beta | sigma2 ~ N(beta0, sigma2 * V0)`` with ``V0 = tau2 I`` (or ``beta_cov``), so
        the update is an exact joint draw. ``"independent"``: ``beta ~ N(beta0, V0)`` independent
        of ``sigma2``; the update is one two-block Gibbs sweep (``beta | sigma2``, ``sigma2 | beta``).
    m : (p,) floats, default 0 ; S : (p, p) SPD, default I
        Fixed covariate distribution ``N(m, S)`` (seed 000) when ``hyperprior`` is None.
    hyperprior : None or "niw"
        ``"niw"``: ``m`` and ``S`` are parameters with the normal--inverse-Wishart prior
        ``S ~ InvWishart(nu0, Psi0)``, ``m | S ~ N(mu0, S / kappa0)``, updated exactly from the
        latent covariates (seed 003 ch. 5, Gibbs-SS-Update's data model).
    mu0 : (p,), default 0 ; kappa0 : float > 0, default 1 ; nu0 : float > p - 1, default p + 2 ;
    Psi0 : (p, p) SPD, default I
        NIW hyperparameters (only with ``hyperprior="niw"``).

    covariates : None, str or list of p str, default None (every column normal)
        Per-column covariate law (:mod:`privpost.models.covariate_law`): ``"normal"`` (the
        normal columns jointly ``N(m_N, S_NN)``), ``"uniform"`` (``U(lo, hi)`` on the column's
        bounds), ``"bernoulli"`` (values 0/1), ``"categorical"`` (integer levels ``lo..hi``);
        columns of different kinds independent. Only without ``hyperprior`` unless all normal.
        The law used is stated in every posterior's notes (:meth:`covariate_note`).
    covariate_bounds : (p, 2) floats, optional
        Column bounds; required for uniform / categorical columns (the CLI takes the release's
        ``bounds_x``).
    covariate_probs : list of p entries, optional
        ``None`` (the column's probabilities are learned, below), or fixed: a Bernoulli
        ``q = P(x_j = 1)`` or a categorical probability vector.
    covariate_alpha : list of p entries, optional
        Prior of a learned Bernoulli / categorical column: ``None`` (``Beta(1, 1)`` /
        ``Dirichlet(1, ..., 1)``), a pair ``(a, b)`` for ``q_j ~ Beta(a, b)`` or ``K_j``
        concentrations over the levels ``lo..hi``.

    Parameters of the model: ``beta`` ``(p+1,)`` (intercept first); ``sigma2`` ``()`` when unknown;
    ``m`` ``(p,)`` and ``S`` ``(p, p)`` with ``hyperprior="niw"``; per learned column
    ``q_x{j}`` ``()`` (Bernoulli, ``P(x_j = 1)``) or ``pi_x{j}`` ``(K_j,)`` (categorical),
    updated by their exact conjugate draw given the (latent) covariates
    (:mod:`privpost.models.covariate_law`).

    Update: exact conjugate draws using the latent records on their original scale (clamping is
    the query's business; seed 000 pitfall 2); the ``"independent"`` prior uses one Gibbs sweep.
    Compiled with Numba (first call compiles, cached on disk).

    Spec: ``"linear-regression:p=2,sigma2=2,tau2=4,m=0.9;-1.17"``,
    ``"linear-regression:p=1,a0=20,b0=0.5,hyperprior=niw,nu0=50"``.
    """

    name = "linear-regression"
    records_doc = "rows [x_1..x_p, y], shape (n, p+1)"

    def __init__(self, p: int, sigma2: float | None = None, tau2: float = 4.0, beta0=None,
                 beta_cov=None, a0: float = 2.0, b0: float = 2.0, prior: str = "conjugate",
                 m=None, S=None, hyperprior: str | None = None, mu0=None, kappa0: float = 1.0,
                 nu0: float | None = None, Psi0=None, covariates=None, covariate_bounds=None,
                 covariate_probs=None, covariate_alpha=None):
        p = positive_int("p", p, 1)
        positive_int("p: (p + 1)^2 covariance entries", (p + 1) ** 2, 1)   # resource limit
        k = p + 1
        self.p = p
        self.sigma2 = None if sigma2 is None else positive_float("sigma2", sigma2)
        self.tau2 = positive_float("tau2", tau2)
        self.beta0 = np.zeros(k) if beta0 is None else float_array("beta0", beta0, (k,))
        self._beta0_given = beta0 is not None
        if beta_cov is None:
            self.beta_cov = self.tau2 * np.eye(k)
            self._beta_cov_given = False
        else:
            self.beta_cov, _ = spd_matrix("beta_cov", beta_cov, k)
            self._beta_cov_given = True
        self._L0 = np.linalg.cholesky(self.beta_cov)
        self._P0 = np.linalg.inv(self.beta_cov)
        self._P0 = 0.5 * (self._P0 + self._P0.T)
        self._h0 = self._P0 @ self.beta0
        self._c0 = float(self.beta0 @ self._h0)
        self._logdet_V0 = 2.0 * float(np.log(np.diag(self._L0)).sum())

        if prior not in ("conjugate", "independent"):
            raise PrivpostError(f"prior must be 'conjugate' or 'independent', got {prior!r}")
        self.prior = prior
        self.a0 = positive_float("a0", a0)
        self.b0 = positive_float("b0", b0)

        if hyperprior is not None and str(hyperprior).lower() not in ("niw", "none"):
            raise PrivpostError(f"hyperprior must be None or 'niw', got {hyperprior!r}")
        self.hyperprior = None if hyperprior is None or str(hyperprior).lower() == "none" else "niw"
        if self.hyperprior is None:
            for nm, v in (("mu0", mu0), ("nu0", nu0), ("Psi0", Psi0)):
                if v is not None:
                    raise PrivpostError(f"{nm} is a NIW hyperparameter: it needs hyperprior='niw'")
            self.m = np.zeros(p) if m is None else float_array("m", m, (p,))
            self.S, self._LS = spd_matrix("S", np.eye(p) if S is None else S, p)
            self._LS_logdet = float(np.log(np.diag(self._LS)).sum())
        else:
            if m is not None or S is not None:
                raise PrivpostError("with hyperprior='niw', m and S are parameters; give the NIW "
                                    "hyperparameters mu0, kappa0, nu0, Psi0 instead")
            self.mu0 = np.zeros(p) if mu0 is None else float_array("mu0", mu0, (p,))
            self.kappa0 = positive_float("kappa0", kappa0)
            self.nu0 = float(p + 2) if nu0 is None else finite_float("nu0", nu0)
            if not self.nu0 > p - 1:
                raise PrivpostError(f"nu0 must be > p - 1 = {p - 1}, got {nu0!r}")
            self.Psi0, _ = spd_matrix("Psi0", np.eye(p) if Psi0 is None else Psi0, p)
            # log normalising constant of InvWishart(nu0, Psi0), used by every log_prior call
            from scipy.special import multigammaln   # here, not at module level: start-up time

            _, logdet_Psi = np.linalg.slogdet(self.Psi0)
            self._iw_log_norm = (0.5 * self.nu0 * logdet_Psi - 0.5 * self.nu0 * p * math.log(2.0)
                                 - multigammaln(0.5 * self.nu0, p))

        from privpost.models.covariate_law import CovariateLaw

        if self.hyperprior is None:
            self._cov = CovariateLaw(p, covariates, covariate_bounds, covariate_probs, self.m,
                                     self.S, alpha=covariate_alpha)
        else:
            self._cov = CovariateLaw(p, covariates, covariate_bounds, covariate_probs,
                                     alpha=covariate_alpha)
        if self.hyperprior == "niw" and not self._cov.all_normal:
            raise PrivpostError("covariates: hyperprior='niw' models every covariate as normal; "
                                f"got covariates={list(self._cov.kinds)} (drop hyperprior, or "
                                "declare every column 'normal')")

        self.param_shapes = {"beta": (k,)}
        if self.sigma2 is None:
            self.param_shapes["sigma2"] = ()
        if self.hyperprior == "niw":
            self.param_shapes["m"] = (p,)
            self.param_shapes["S"] = (p, p)
        self.param_shapes.update(self._cov.param_shapes)     # learned covariate probabilities
        self.conjugate = self.sigma2 is not None or self.prior == "conjugate"
        self._inv_s2 = None if self.sigma2 is None else 1.0 / self.sigma2
        self._ntri = p * (p - 1) // 2

    # ---------------------------------------------------------------- serialisation
    def hyperparameters(self):
        d = {"p": self.p, "sigma2": self.sigma2}
        if self._beta_cov_given:
            d["beta_cov"] = self.beta_cov.tolist()
        else:
            d["tau2"] = self.tau2
        if self._beta0_given:
            d["beta0"] = self.beta0.tolist()
        if self.sigma2 is None:
            d.update(a0=self.a0, b0=self.b0, prior=self.prior)
        if self.hyperprior is None:
            d.update(m=self.m.tolist(), S=self.S.tolist())
            d.update(self._cov.hyperparameters())
        else:
            d.update(hyperprior="niw", mu0=self.mu0.tolist(), kappa0=self.kappa0, nu0=self.nu0,
                     Psi0=self.Psi0.tolist())
        return d

    def covariate_note(self, unused_by: str | None = None, how: dict | None = None) -> str:
        """The covariate law in words, for posterior notes (issue 23: never silent), starting
        with :data:`COVARIATE_NOTE`. :func:`privpost.infer` adds it to every posterior of this
        model unless the method stated its own: a method that does not use the law as the
        model states it says what applies instead, by the two arguments.

        ``unused_by``: the method (and why) when the law plays no part in its posterior (e.g.
        gibbs-ss taking the covariate moments from a release): the note then starts with
        :data:`COVARIATE_UNUSED` and says that the learned probabilities (``q_x1``, ...) are
        not inferred. ``how``: per learned parameter name, what the method does with it
        instead of the conjugate update (naive: a plug-in, or the prior)."""
        learned = [self._cov.param_name(j) for j in self._cov.learned]
        if unused_by is not None:
            how = {nm: "a priori" for nm in learned}
        if self.hyperprior == "niw":
            law = (f"x ~ N_{self.p}(m, S) with a normal-inverse-Wishart hyperprior on (m, S) "
                   "(every column normal)")
        elif self._cov.all_normal:
            law = f"x ~ N_{self.p}(m, S), m = {np.round(self.m, 4).tolist()}, S " + (
                "= I" if np.array_equal(self.S, np.eye(self.p)) else "as given")
        else:
            law = self._cov.describe(how) + " (independent across kinds)"
        if unused_by is not None:
            return (f"{COVARIATE_UNUSED}{unused_by}: the model's law ({law}) does not enter "
                    "this posterior" + (f"; {', '.join(learned)} not inferred (no draws)"
                                        if learned else ""))
        default = "" if self._cov.declared or self.hyperprior == "niw" else (
            " [the default: no column types declared; binary, bounded or categorical columns "
            "need covariates=..., e.g. covariates=bernoulli;uniform]")
        return f"{COVARIATE_NOTE}{law}{default}"

    def covariate_mismatch(self, query) -> str | None:
        """A sentence when the fixed normal law puts less than half of a column's mass inside
        the release's bounds (``query.bounds_x``), e.g. ``N(0, 1)`` for a column bounded by
        ``(0, 1)`` (34%): most simulated covariates are then clamped, which real ones are not.
        ``None`` otherwise (and with ``hyperprior="niw"``, whose ``m, S`` are learned)."""
        bx = getattr(query, "bounds_x", None)
        if self.hyperprior is not None or bx is None or len(bx) != self.p:
            return None
        def cdf(z):   # standard normal (no scipy: start-up time)
            return 0.5 * math.erfc(-z / math.sqrt(2.0))

        bad = []
        for j in self._cov.normal_idx:
            lo, hi = bx[j]
            sd = math.sqrt(self.S[j, j])
            mass = cdf((hi - self.m[j]) / sd) - cdf((lo - self.m[j]) / sd)
            if mass < 0.5:
                bad.append(f"x{j + 1} ~ N({self.m[j]:g}, {self.S[j, j]:g}) has {100 * mass:.0f}% "
                           f"of its mass inside the bounds ({lo:g}, {hi:g})")
        if not bad:
            return None
        return ("covariate model contradicts the release's bounds: " + "; ".join(bad)
                + ": declare the columns' laws (covariates=bernoulli/uniform/categorical/normal) "
                "or set m, S")

    # ---------------------------------------------------------------- sampling
    def _iw_factor(self, rng, Psi, nu):
        """B with B B^T ~ InvWishart(nu, Psi)."""
        p = self.p
        chi2 = rng.chisquare(nu - np.arange(p))
        normals = rng.standard_normal(self._ntri)
        return _kernels().inv_wishart_bartlett(Psi, chi2, normals)

    def prior_sample(self, rng):
        rng = as_rng(rng)
        out = {}
        z = rng.standard_normal(self.p + 1)
        if self.sigma2 is None:
            s2 = self.b0 / rng.standard_gamma(self.a0)
            scale = math.sqrt(s2) if self.prior == "conjugate" else 1.0
            out["beta"] = self.beta0 + scale * (self._L0 @ z)
            out["sigma2"] = np.float64(s2)
        else:
            out["beta"] = self.beta0 + self._L0 @ z
        if self.hyperprior == "niw":
            B = self._iw_factor(rng, self.Psi0, self.nu0)
            out["S"] = B @ B.T
            out["m"] = self.mu0 + (B @ rng.standard_normal(self.p)) / math.sqrt(self.kappa0)
        out.update(self._cov.prior_sample(rng))
        return out

    def _cov_model(self, params):
        if self.hyperprior is None:
            return self.m, self._LS
        L = _kernels().chol_lower(np.ascontiguousarray(params["S"], dtype=np.float64))
        return np.asarray(params["m"], dtype=np.float64), L

    def simulate(self, params, n, rng):
        rng = as_rng(rng)
        n = int(n)
        p = self.p
        m, L = self._cov_model(params)
        beta = np.asarray(params["beta"], dtype=np.float64)
        sd = math.sqrt(self.sigma2 if self.sigma2 is not None else float(params["sigma2"]))
        if not self._cov.all_normal:
            out = np.empty((n, p + 1))
            out[:, :p] = self._cov.sample(n, rng, params)
            out[:, p] = (beta[0] + out[:, :p] @ beta[1:]
                         + sd * rng.standard_normal(n))
            return out
        Z = rng.standard_normal((n, p + 1))
        out = np.empty((n, p + 1))
        x = out[:, :p]
        np.matmul(Z[:, :p], L.T, out=x)
        x += m
        out[:, p] = beta[0] + x @ beta[1:] + sd * Z[:, p]
        return out

    def update(self, params, records, rng):
        K = _numeric or _kernels()
        p = self.p
        n = records.shape[0]
        z = rng.standard_normal(p + 1)
        if self.sigma2 is not None:
            out = {"beta": K.reg_update_known(records, p, self._P0, self._h0, self._inv_s2, z)}
        elif self.prior == "conjugate":
            g = rng.standard_gamma(self.a0 + 0.5 * n)
            beta, s2 = K.reg_update_nig(records, p, self._P0, self._h0, self._c0, self.a0,
                                        self.b0, g, z)
            out = {"beta": beta, "sigma2": np.float64(s2)}
        else:
            g = rng.standard_gamma(self.a0 + 0.5 * n)
            beta, s2 = K.reg_update_indep(records, p, self._P0, self._h0, self.a0, self.b0,
                                          float(params["sigma2"]), g, z)
            out = {"beta": beta, "sigma2": np.float64(s2)}
        if self.hyperprior == "niw":
            if n == 0:
                pr = self.prior_sample(rng)
                out["m"], out["S"] = pr["m"], pr["S"]
            else:
                chi2 = rng.chisquare(self.nu0 + n - np.arange(p))
                normals = rng.standard_normal(self._ntri + p)
                out["m"], out["S"] = K.niw_update(records, p, self.mu0, self.kappa0, self.Psi0,
                                                  chi2, normals[:self._ntri], normals[self._ntri:])
        if self._cov.learned:
            out.update(self._cov.update(records, rng))
        return out

    # ---------------------------------------------------------------- densities
    def log_likelihood(self, params, records):
        r = np.asarray(records, dtype=np.float64)
        p = self.p
        x, y = r[:, :p], r[:, p]
        if not self._cov.all_normal:
            lx = self._cov.log_density(x, params)
        else:
            if self.hyperprior is None:
                m, L, half_logdet = self.m, self._LS, self._LS_logdet
            else:
                m = np.asarray(params["m"], dtype=np.float64)
                L = np.linalg.cholesky(np.asarray(params["S"], dtype=np.float64))
                half_logdet = float(np.log(np.diag(L)).sum())
            u = np.linalg.solve(L, (x - m).T)
            lx = -0.5 * (u * u).sum(axis=0) - half_logdet - 0.5 * p * _LOG_2PI
        beta = np.asarray(params["beta"], dtype=np.float64)
        s2 = self.sigma2 if self.sigma2 is not None else float(params["sigma2"])
        e = y - beta[0] - x @ beta[1:]
        return lx - 0.5 * e * e / s2 - 0.5 * math.log(2.0 * math.pi * s2)

    def log_prior(self, params):
        beta = np.asarray(params["beta"], dtype=np.float64)
        k = self.p + 1
        d = beta - self.beta0
        q = float(d @ (self._P0 @ d))   # (beta - beta0)^T V0^{-1} (beta - beta0)
        lp = 0.0
        if self.sigma2 is None:
            s2 = float(params["sigma2"])
            if not s2 > 0:
                return -np.inf
            lp += (self.a0 * math.log(self.b0) - math.lgamma(self.a0)
                   - (self.a0 + 1) * math.log(s2) - self.b0 / s2)
            if self.prior == "conjugate":
                lp += -0.5 * q / s2 - 0.5 * (self._logdet_V0 + k * math.log(s2)) - 0.5 * k * _LOG_2PI
            else:
                lp += -0.5 * q - 0.5 * self._logdet_V0 - 0.5 * k * _LOG_2PI
        else:
            lp += -0.5 * q - 0.5 * self._logdet_V0 - 0.5 * k * _LOG_2PI
        if self.hyperprior == "niw":
            p = self.p
            S = np.asarray(params["S"], dtype=np.float64)
            try:
                L = np.linalg.cholesky(S)
            except np.linalg.LinAlgError:
                return -np.inf
            logdet_S = 2.0 * float(np.log(np.diag(L)).sum())
            Sinv = np.linalg.inv(S)
            nu = self.nu0
            lp += (self._iw_log_norm
                   - 0.5 * (nu + p + 1) * logdet_S - 0.5 * float(np.trace(self.Psi0 @ Sinv)))
            dm = np.asarray(params["m"], dtype=np.float64) - self.mu0
            lp += (-0.5 * self.kappa0 * float(dm @ Sinv @ dm) - 0.5 * logdet_S
                   + 0.5 * p * math.log(self.kappa0) - 0.5 * p * _LOG_2PI)
        if self._cov.learned:
            lp += self._cov.log_prior(params)
        return lp

    def nonprivate_posterior(self, records):
        """Posterior hyperparameters given complete records (constructor names).

        Known ``sigma2``: ``{"beta0": mean, "beta_cov": cov}`` (normal posterior of ``beta``).
        Conjugate prior: ``{"beta0", "beta_cov", "a0", "b0"}`` (``beta | sigma2 ~
        N(beta0, sigma2 beta_cov)``, ``sigma2 ~ InvGamma(a0, b0)``). With ``hyperprior="niw"``
        also ``{"mu0", "kappa0", "nu0", "Psi0"}``; with learned covariate probabilities also
        ``{"covariate_alpha"}`` (the Beta pairs / Dirichlet concentrations plus the level counts).
        The ``"independent"`` prior has no closed form.
        """
        if not self.conjugate:
            raise NotImplementedError("prior='independent' has no closed-form posterior; "
                                      "iterate update() (a Gibbs sweep)")
        r = self.validate_records(records)
        n = r.shape[0]
        p = self.p
        Z = np.column_stack([np.ones(n), r[:, :p]])
        y = r[:, p]
        ZtZ, Zty, yty = Z.T @ Z, Z.T @ y, float(y @ y)
        if self.sigma2 is not None:
            Lam = self._P0 + ZtZ / self.sigma2
            cov = np.linalg.inv(Lam)
            post = {"beta0": (cov @ (self._h0 + Zty / self.sigma2)).tolist(),
                    "beta_cov": (0.5 * (cov + cov.T)).tolist()}
        else:
            Lam = self._P0 + ZtZ
            cov = np.linalg.inv(Lam)
            mu = cov @ (self._h0 + Zty)
            bn = self.b0 + 0.5 * (yty + self._c0 - float(mu @ Lam @ mu))
            post = {"beta0": mu.tolist(), "beta_cov": (0.5 * (cov + cov.T)).tolist(),
                    "a0": self.a0 + 0.5 * n, "b0": bn}
        if self.hyperprior == "niw":
            x = r[:, :p]
            xbar = x.mean(axis=0) if n else np.zeros(p)
            dx = x - xbar
            kn = self.kappa0 + n
            dm = xbar - self.mu0
            post.update(mu0=((self.kappa0 * self.mu0 + n * xbar) / kn).tolist(), kappa0=kn,
                        nu0=self.nu0 + n,
                        Psi0=(self.Psi0 + dx.T @ dx + (self.kappa0 * n / kn) * np.outer(dm, dm)).tolist())
        if self._cov.learned:
            law = self._cov
            post["covariate_alpha"] = [
                None if law.conc[j] is None else
                (lambda c: [float(c[1]), float(c[0])] if law.kinds[j] == "bernoulli"
                 else c.tolist())(law.conc[j] + law.level_counts(r, j))
                for j in range(p)]
        return post

    def validate_records(self, records):
        arr = np.asarray(records)
        if arr.ndim != 2 or arr.shape[1] != self.p + 1:
            raise DataError(f"model {self.name!r} takes records of shape (n, {self.p + 1}) = "
                            f"[x_1..x_{self.p}, y], got shape {arr.shape}")
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise DataError(f"model {self.name!r}: records must be numeric") from None
        if not np.all(np.isfinite(arr)):
            raise DataError(f"model {self.name!r}: records contain NaN or infinite values")
        return arr

    # ---------------------------------------------------------------- non-centred protocol
    # Records as x = m + L z (covariates, L = chol(S)), y = beta_0 + x^T beta_{1:p} + sigma e,
    # with (z, e) i.i.d. standard normal. With fixed m, S (seed 000) the move changes beta and,
    # when it is a model parameter, sigma2; the covariates then serve as their own innovations:
    # [x_1..x_p, e] with e = (y - beta_0 - x^T beta_{1:p}) / sigma (deterministic given x).
    # With hyperprior="niw" the same move also changes m and S: the innovations are [z, e] with
    # z = L^{-1} (x - m), and the walk runs in free coordinates
    # v = [beta, log sigma2 (when unknown), m, log diag L, strictly lower L (row-major)], whose
    # density is the prior times |d theta / d v| = sigma2 * 2^p prod_i L_ii^(p - i + 2)
    # (i = 1..p; S = L L^T has |dS/dL| = 2^p prod_i L_ii^(p - i + 1), Muirhead Thm 2.1.9, and
    # d L_ii / d log L_ii = L_ii).
    @property
    def interweave_params(self) -> tuple:
        """``("beta",)`` with a known ``sigma2``, else ``("beta", "sigma2")`` (proposals with
        ``sigma2 <= 0`` have ``log_prior = -inf`` and are rejected); with ``hyperprior="niw"``
        also ``"m"`` and ``"S"``."""
        names = ("beta",) if self.sigma2 is not None else ("beta", "sigma2")
        return names + (("m", "S") if self.hyperprior == "niw" else ())

    def _sd(self, params):
        return math.sqrt(self.sigma2 if self.sigma2 is not None else float(params["sigma2"]))

    def innovations(self, params, records, rng=None):
        """``[x_1..x_p, e]`` (``[z_1..z_p, e]`` with ``z = L^{-1}(x - m)`` when ``m, S`` are
        parameters), ``e = (y - beta_0 - x beta_{1:p}) / sigma``; shape ``(n, p+1)``; ``rng``
        unused."""
        r = np.asarray(records, dtype=np.float64)
        p = self.p
        beta = np.asarray(params["beta"], dtype=np.float64)
        u = r.copy()
        u[:, p] = (r[:, p] - beta[0] - r[:, :p] @ beta[1:]) / self._sd(params)
        if self.hyperprior == "niw":
            m, L = self._cov_model(params)
            u[:, :p] = np.linalg.solve(L, (r[:, :p] - m).T).T
        return u

    def from_innovations(self, params, u):
        """Records ``[x, beta_0 + x beta_{1:p} + sigma e]`` from innovations ``[x, e]`` (``x =
        m + L z`` from ``[z, e]`` when ``m, S`` are parameters); shape ``(n, p+1)``."""
        u = np.asarray(u, dtype=np.float64)
        p = self.p
        beta = np.asarray(params["beta"], dtype=np.float64)
        out = u.copy()
        if self.hyperprior == "niw":
            m, L = self._cov_model(params)
            out[:, :p] = m + u[:, :p] @ L.T
        out[:, p] = beta[0] + out[:, :p] @ beta[1:] + self._sd(params) * u[:, p]
        return out

    # free coordinates exist only with hyperprior="niw" (damcmc looks for callables; None
    # means "walk on the moved parameters themselves", the behaviour without m, S)
    @property
    def interweave_to_free(self):
        return self._iw_to_free if self.hyperprior == "niw" else None

    @property
    def interweave_from_free(self):
        return self._iw_from_free if self.hyperprior == "niw" else None

    @property
    def interweave_log_jacobian(self):
        return self._iw_log_jacobian if self.hyperprior == "niw" else None

    def _iw_to_free(self, params):
        """``[beta (p+1), log sigma2 (if unknown), m (p), log diag L (p), lower L]``,
        ``L = chol(S)``; shape ``(p + 1 + [1] + 2p + p(p-1)/2,)``."""
        p = self.p
        parts = [np.asarray(params["beta"], dtype=np.float64)]
        if self.sigma2 is None:
            parts.append([math.log(float(params["sigma2"]))])
        m, L = self._cov_model(params)
        parts += [m, np.log(np.diag(L)), L[np.tril_indices(p, -1)]]
        return np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in parts])

    def _iw_from_free(self, params, v):
        """``params`` with ``beta``, ``sigma2``, ``m`` ``(p,)`` and ``S = L L^T`` ``(p, p)``
        rebuilt from ``v`` (``exp`` overflow gives ``inf``: zero prior density)."""
        v = np.asarray(v, dtype=np.float64)
        p, k = self.p, self.p + 1
        out = dict(params)
        out["beta"] = v[:k].copy()
        off = k
        with np.errstate(over="ignore"):
            if self.sigma2 is None:
                out["sigma2"] = np.float64(math.exp(v[off]) if v[off] < 709.0 else math.inf)
                off += 1
            out["m"] = v[off:off + p].copy()
            L = np.diag(np.exp(v[off + p:off + 2 * p]))
        L[np.tril_indices(p, -1)] = v[off + 2 * p:]
        with np.errstate(over="ignore", invalid="ignore"):
            out["S"] = L @ L.T
        return out

    def _iw_log_jacobian(self, params):
        """``log sigma2 (if unknown) + p log 2 + sum_i (p - i + 2) log L_ii`` (i = 1..p)."""
        p = self.p
        _, L = self._cov_model(params)
        lj = p * math.log(2.0) + float(((p + 1 - np.arange(p)) * np.log(np.diag(L))).sum())
        if self.sigma2 is None:
            lj += math.log(float(params["sigma2"]))
        return lj

    def compiled_model(self):
        """Numba versions of update/simulate for the compiled DA-MCMC driver (every variant:
        known or unknown ``sigma2``, either prior, fixed covariates or NIW)."""
        from privpost.models import _compiled
        return _compiled.linear_regression(self)

    def check_query(self, query):
        self._require_kind(query, {"regressionstats": "RegressionStats"})
        qp = regression_p(query)
        if qp is not None and qp != self.p:
            raise self._incompatible(query, f"RegressionStats with p = {self.p} covariates",
                                     f"the query has p = {qp} covariates, the model p = {self.p}")
