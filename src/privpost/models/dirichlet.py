"""Dirichlet model for compositional records (seed 002, Guo, Barrientos & Pena).

Records are rows on the open simplex, ``x_i ~ Dirichlet(alpha)``; the prior on ``alpha`` is the
paper's p1 (independent Gamma(shape, rate), default Gamma(1, 0.1): mean 10) or, with a
correlation matrix, its p4 (Gaussian copula with Gamma marginals). ``alpha`` is updated by slice
sampling on ``log(alpha)`` (Neal 2003) from the complete-record sufficient statistic
``T_j = sum_i log x_ij`` -- the **uncensored** latent logs (seed 002 pitfall 9).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import (digamma, gammainc, gammaincc, gammaincinv, gammainccinv, gammaln,
                           ndtr, ndtri, zeta)

from privpost.errors import DataError, PrivpostError
from privpost.models.base import (Model, as_rng, float_array, positive_float, positive_int,
                                  query_attr, register_model, spd_matrix)
from privpost.models.dirichlet_tools import _TINY, dirichlet_mle, dirichlet_open

__all__ = ["Dirichlet"]

_U_MAX = 700.0  # |log alpha| beyond this overflows exp(); the target is treated as 0 there
_Z_CLIP = 38.0


@register_model
class Dirichlet(Model):
    """Compositional records ``x_i ~ Dirichlet(alpha)`` on the open simplex.

    Parameters
    ----------
    parts : int >= 2
        ``D``, the number of components of a record.
    prior_shape, prior_rate : float or (D,) floats > 0, defaults 1.0 and 0.1
        ``alpha_j ~ Gamma(prior_shape_j, rate=prior_rate_j)`` independently (seed 002 prior p1
        is Gamma(1, 0.1); p3 is the same family with fitted values).
    prior_corr : (D, D) correlation matrix, optional
        Gaussian-copula prior with the Gamma marginals above (seed 002 prior p4).
    slice_steps : int >= 1, default 20
        Slice-sampling sweeps per :meth:`update`, all from the same complete-record statistic
        ``T`` (computed once per update): ``alpha | x`` is strongly correlated across
        coordinates at large ``n``, so one coordinate-wise sweep moves it little, while a sweep
        costs ``O(D)`` log-gammas, not ``O(n)``. 20 (issue 22; 1 before) is measured on the ATUS
        releases (benchmarks/README.md, "ATUS beside SOMA").
    slice_width : float > 0, default 1.0
        Initial interval / hyperrectangle width on the ``log(alpha)`` scale.
    slice_method : {"univariate", "hyperrect"}, default "univariate"
        ``"univariate"``: one stepping-out + shrinkage slice update per coordinate of
        ``log(alpha)`` (Neal 2003 Figs. 3 and 5). ``"hyperrect"``: all coordinates at once in a
        randomly positioned hyperrectangle with shrinkage (Neal 2003 Sec. 5.1, the procedure
        seed 002 cites as "Figure 8"); cheap per step but sensitive to ``slice_width``.
    max_steps_out : int >= 0, default 32
        Bound on stepping-out steps per coordinate (the bounded variant stays exact).

    Parameters of the model: ``alpha`` shape ``(D,)``.
    Records: ``(n, D)`` float64 rows, strictly positive, summing to 1. Fits
    ``CensoredLogMean(parts=D, ...)`` (the censoring is the query's business).
    Update: ``slice_steps`` slice-sampling sweeps on ``u = log(alpha)``, target
    ``n [lgamma(sum alpha) - sum lgamma(alpha_j)] + sum_j (alpha_j - 1) T_j + log prior(alpha)
    + sum_j u_j`` with ``T_j = sum_i log x_ij``.
    Spec: ``"dirichlet:parts=3"``, ``"dirichlet:parts=3,prior_shape=1,prior_rate=0.1,slice_steps=2"``.
    """

    name = "dirichlet"
    conjugate = False
    records_doc = "rows on the open simplex, shape (n, D)"

    def __init__(self, parts: int, prior_shape=1.0, prior_rate=0.1, prior_corr=None,
                 slice_steps: int = 20, slice_width: float = 1.0,
                 slice_method: str = "univariate", max_steps_out: int = 32):
        D = positive_int("parts", parts, 2)
        self.parts = D
        self.prior_shape = float_array("prior_shape", prior_shape, (D,), positive=True)
        self.prior_rate = float_array("prior_rate", prior_rate, (D,), positive=True)
        self._shape_in, self._rate_in = prior_shape, prior_rate
        if prior_corr is None:
            self.prior_corr = None
            self._Q = None
        else:
            R, _ = spd_matrix("prior_corr", prior_corr, D)
            if not np.allclose(np.diag(R), 1.0):
                raise PrivpostError("prior_corr must be a correlation matrix (unit diagonal)")
            self.prior_corr = R
            self._LR = np.linalg.cholesky(R)
            self._Q = np.linalg.inv(R) - np.eye(D)
            self._Q = 0.5 * (self._Q + self._Q.T)
            self._half_logdet_R = float(np.log(np.diag(self._LR)).sum())
        self.slice_steps = positive_int("slice_steps", slice_steps, 1)
        self.slice_width = positive_float("slice_width", slice_width)
        if slice_method not in ("univariate", "hyperrect"):
            raise PrivpostError(f"slice_method must be 'univariate' or 'hyperrect', got {slice_method!r}")
        self.slice_method = slice_method
        self.max_steps_out = positive_int("max_steps_out", max_steps_out, 0)
        self.param_shapes = {"alpha": (D,)}
        self._v = self.prior_shape.tolist()
        self._w = self.prior_rate.tolist()
        self._log_norm_gamma = float(np.sum(self.prior_shape * np.log(self.prior_rate)
                                            - gammaln(self.prior_shape)))

    def hyperparameters(self):
        def arr_or_scalar(given, arr):
            return float(given) if np.ndim(given) == 0 else arr.tolist()

        d = {"parts": self.parts, "prior_shape": arr_or_scalar(self._shape_in, self.prior_shape),
             "prior_rate": arr_or_scalar(self._rate_in, self.prior_rate)}
        if self.prior_corr is not None:
            d["prior_corr"] = self.prior_corr.tolist()
        d.update(slice_steps=self.slice_steps, slice_width=self.slice_width,
                 slice_method=self.slice_method, max_steps_out=self.max_steps_out)
        return d

    # ------------------------------------------------------------------ prior pieces
    def _zscore(self, j: int, a: float) -> float:
        """Normal score Phi^{-1}(F_Gamma(a)) of component j (tail-accurate)."""
        x = self._w[j] * a
        lo = float(gammainc(self._v[j], x))
        if lo < 0.5:
            z = float(ndtri(lo)) if lo > 0 else -_Z_CLIP
        else:
            hi = float(gammaincc(self._v[j], x))
            z = -float(ndtri(hi)) if hi > 0 else _Z_CLIP
        return min(max(z, -_Z_CLIP), _Z_CLIP)

    def prior_sample(self, rng):
        rng = as_rng(rng)
        if self.prior_corr is None:
            return {"alpha": rng.gamma(self.prior_shape, 1.0 / self.prior_rate)}
        z = self._LR @ rng.standard_normal(self.parts)
        lo = gammaincinv(self.prior_shape, ndtr(z))
        hi = gammainccinv(self.prior_shape, ndtr(-z))
        a = np.where(z < 0, lo, hi) / self.prior_rate
        return {"alpha": np.maximum(a, np.finfo(np.float64).tiny)}

    def log_prior(self, params):
        a = np.asarray(params["alpha"], dtype=np.float64)
        if np.any(~(a > 0)):
            return -np.inf
        lp = self._log_norm_gamma + float(np.sum((self.prior_shape - 1) * np.log(a)
                                                 - self.prior_rate * a))
        if self._Q is not None:
            z = np.array([self._zscore(j, float(a[j])) for j in range(self.parts)])
            lp += -self._half_logdet_R - 0.5 * float(z @ self._Q @ z)
        return lp

    # ------------------------------------------------------------------ records
    def simulate(self, params, n, rng):
        return dirichlet_open(as_rng(rng), np.asarray(params["alpha"], dtype=np.float64), int(n))

    def log_likelihood(self, params, records):
        a = np.asarray(params["alpha"], dtype=np.float64)
        x = np.asarray(records, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return gammaln(a.sum()) - gammaln(a).sum() + np.log(x) @ (a - 1.0)

    # ------------------------------------------------------------------ slice sampling
    def log_target(self, u, T, n) -> float:
        """Log posterior density of ``u = log(alpha)`` up to a constant (Jacobian included)."""
        ul = [float(x) for x in np.asarray(u, dtype=np.float64).ravel()]
        if not all(-_U_MAX < x < _U_MAX for x in ul):
            return -math.inf
        a = [math.exp(x) for x in ul]
        Tl = [float(t) for t in np.asarray(T, dtype=np.float64).ravel()]
        lg = math.lgamma
        val = n * (lg(sum(a)) - sum(lg(x) for x in a))
        for j in range(self.parts):
            val += (a[j] - 1.0) * Tl[j] + self._v[j] * ul[j] - self._w[j] * a[j]
        if self._Q is not None:
            z = np.array([self._zscore(j, a[j]) for j in range(self.parts)])
            val -= 0.5 * float(z @ self._Q @ z)
        return val if val == val else -math.inf

    def update(self, params, records, rng):
        n = records.shape[0]
        T = np.log(records).sum(axis=0) if n else np.zeros(self.parts)
        u = np.log(np.asarray(params["alpha"], dtype=np.float64))
        if self.slice_method == "univariate":
            u = self._sweep_univariate(u, T.tolist(), n, rng)
        else:
            for _ in range(self.slice_steps):
                u = self._step_hyperrect(u, T, n, rng)
        return {"alpha": np.exp(u)}

    def _sweep_univariate(self, u, T, n, rng):
        D = self.parts
        v, w = self._v, self._w
        Q = self._Q
        u = u.tolist()
        a = [math.exp(x) for x in u]
        z = [self._zscore(j, a[j]) for j in range(D)] if Q is not None else None
        width = self.slice_width
        msteps = self.max_steps_out
        lgam = math.lgamma
        # uniforms consumed in blocks
        buf = rng.random(64)
        pos = 0

        def unif():
            nonlocal buf, pos
            if pos == buf.shape[0]:
                buf = rng.random(64)
                pos = 0
            pos += 1
            return float(buf[pos - 1])

        for _ in range(self.slice_steps):
            for j in range(D):
                a0_rest = sum(a) - a[j]
                Tj, vj, wj = T[j], v[j], w[j]
                if Q is not None:
                    cross = sum(Q[j, l] * z[l] for l in range(D) if l != j)
                    Qjj = Q[j, j]

                def f(x):
                    if not -_U_MAX < x < _U_MAX:
                        return -math.inf
                    aj = math.exp(x)
                    val = (n * (lgam(a0_rest + aj) - lgam(aj)) + (aj - 1.0) * Tj
                           + vj * x - wj * aj)
                    if Q is not None:
                        zj = self._zscore(j, aj)
                        val -= 0.5 * Qjj * zj * zj + zj * cross
                    return val if val == val else -math.inf

                x0 = u[j]
                f0 = f(x0)
                # slice level (log scale); 1 - U in (0, 1]
                logy = f0 + math.log(1.0 - unif())
                L = x0 - width * unif()
                R = L + width
                J = int(msteps * unif())
                Kst = msteps - 1 - J if msteps > 0 else 0
                while J > 0 and f(L) > logy:
                    L -= width
                    J -= 1
                while Kst > 0 and f(R) > logy:
                    R += width
                    Kst -= 1
                while True:
                    x1 = L + unif() * (R - L)
                    if f(x1) > logy:
                        break
                    if x1 < x0:
                        L = x1
                    else:
                        R = x1
                    if R - L < 1e-14:  # numerically collapsed: keep the current point
                        x1 = x0
                        break
                u[j] = x1
                a[j] = math.exp(x1)
                if Q is not None:
                    z[j] = self._zscore(j, a[j])
        return np.array(u)

    def _step_hyperrect(self, u, T, n, rng):
        """Neal (2003) Sec. 5.1: randomly positioned hyperrectangle, shrunk towards ``u``."""
        D = self.parts
        w = self.slice_width
        u0 = [float(x) for x in u]
        logy = self.log_target(u0, T, n) + math.log(1.0 - rng.random())
        L = [x - w * r for x, r in zip(u0, rng.random(D).tolist())]
        R = [lo + w for lo in L]
        while True:
            x1 = [lo + r * (hi - lo) for lo, hi, r in zip(L, R, rng.random(D).tolist())]
            if self.log_target(x1, T, n) > logy:
                return np.array(x1)
            for j in range(D):
                if x1[j] < u0[j]:
                    L[j] = x1[j]
                else:
                    R[j] = x1[j]
            if max(hi - lo for lo, hi in zip(L, R)) < 1e-14:
                return np.array(u0)

    # ------------------------------------------------------------------ non-centred protocol
    # Partially non-centred (Papaspiliopoulos, Roberts & Skold 2007). Given x and alpha the
    # gammas are G = S x with S = sum(G) ~ Gamma(sum alpha) independent of x (Lukacs), so a fresh
    # S (drawn in log space when sum(alpha) < 1) gives G_ij ~ Gamma(alpha_j, 1) independent. The
    # innovations are the standardised log-gammas u_ij = (log G_ij - mu(alpha_j)) / sigma(alpha_j)
    # with mu = digamma, sigma = sqrt(trigamma) (mean and sd of log G), and x = g(alpha, u) =
    # rows of exp(mu + sigma u) normalised (log-sum-exp, floored at the smallest positive double,
    # as simulate() does). The law of u depends on alpha only through the non-normal shape of
    # log G; innovations_log_density is that law's log density, which damcmc's move adds to its
    # acceptance ratio. (The exact transport G = F^{-1}_alpha(U) -- the parametrisation before
    # issue 22 -- costs n D gamma quantiles per step, about 25 record sweeps; this one costs one
    # exp per entry.) The random walk runs on log(alpha) (Jacobian prod_j alpha_j).
    interweave_params = ("alpha",)

    @staticmethod
    def _loc_scale(a):
        """``(digamma(a), sqrt(trigamma(a)))``, the mean and sd of ``log G``,
        ``G ~ Gamma(a, 1)``; ``a`` ``(D,)``."""
        return digamma(a), np.sqrt(zeta(2.0, a))

    def innovations(self, params, records, rng=None):
        """Standardised log-gammas ``(n, D)`` float64 (fresh ``S ~ Gamma(sum alpha)``)."""
        rng = as_rng(rng)
        a = np.asarray(params["alpha"], dtype=np.float64)
        x = np.asarray(records, dtype=np.float64)
        n = x.shape[0]
        a0 = float(a.sum())
        if a0 >= 1.0:
            log_s = np.log(rng.standard_gamma(a0, size=n))
        else:   # log S = log G_{a0 + 1} + log(V) / a0 cannot underflow (V = 1 - random in (0, 1])
            log_s = np.log(rng.standard_gamma(a0 + 1.0, size=n)) + np.log1p(-rng.random(n)) / a0
        mu, sd = self._loc_scale(a)
        with np.errstate(divide="ignore"):
            return (log_s[:, None] + np.log(x) - mu) / sd

    def from_innovations(self, params, u):
        """Records ``(n, D)``: rows of ``exp(mu_j + sigma_j u_ij)`` normalised, floored at the
        smallest positive double."""
        a = np.asarray(params["alpha"], dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        mu, sd = self._loc_scale(a)
        log_g = mu + sd * u
        log_g -= log_g.max(axis=1, keepdims=True) if u.shape[0] else 0.0
        x = np.exp(log_g)
        x /= x.sum(axis=1, keepdims=True)
        np.maximum(x, _TINY, out=x)
        return x

    def innovations_log_density(self, params, u):
        """``log p(u | alpha)`` up to a constant free of alpha (``u`` ``(n, D)``): the
        Gamma(alpha_j, 1) log density of ``log G = mu_j + sigma_j u_ij`` plus ``log sigma_j``,
        summed; ``-inf`` outside the support."""
        a = np.asarray(params["alpha"], dtype=np.float64)
        if not np.all((a > 0) & np.isfinite(a)):
            return -math.inf
        u = np.asarray(u, dtype=np.float64)
        mu, sd = self._loc_scale(a)
        y = mu + sd * u
        with np.errstate(over="ignore"):
            val = float(np.sum(a * y - np.exp(y))
                        + u.shape[0] * np.sum(np.log(sd) - gammaln(a)))
        return val if val == val else -math.inf

    #: ``interweave_auto_steps``: moves per iteration when the noise dominates (as damcmc's
    #: AUTO_COMPILED_STEPS) -- at least MOVES_WHEN_NOISY, and MOVES_PER_FREE_PART per free
    #: coordinate of the simplex (D - 1) -- and the ratio noise / sampling variance from which
    #: it does
    MOVES_WHEN_NOISY = 4
    MOVES_PER_FREE_PART = 2
    NOISY_RATIO = 3.0

    def interweave_auto_steps(self, n, noise_var, params):
        """damcmc's ``interweave="auto"`` on the compiled driver: ``(moves per iteration,
        reason)`` for a CensoredLogMean release of ``n`` records with noise variances
        ``noise_var`` ``(D,)``, judged at the start ``params``.

        The non-centred move pays when the noise hides the records' statistic: the ratio
        ``r = max_j noise_var_j / A_j``, ``A_j = (trigamma(alpha_j) - trigamma(alpha_0)) / n``
        the sampling variance of the mean log part ``j``. Measured on the ATUS releases (n =
        3128, 3528; benchmarks/README.md, "ATUS beside SOMA"): at r = 0.09 (eps = 10) and 1.2
        (eps = 3) the centred driver (with ``slice_steps`` = 20) had 3.5x and 1.6x the ESS/s of
        4 moves; at r = 9 (eps = 1) 4 moves had 5x the centred ESS/s. So 0 moves below
        ``NOISY_RATIO`` = 3, else ``max(4, 2 (D - 1))``: the random walk on ``log(alpha)``
        needs more steps per innovation draw as ``D`` grows, and since issue 22's fused step a
        step costs about a quarter of the record sweep + innovations. Measured per CPU second
        (benchmarks/README.md, "ATUS and DPMCMCp1, the fused Dirichlet step"): ATUS eps = 1
        (D = 3) 4, 8 and 16 moves tie; seed 002's alpha5 at n = 5000, eps = 1.5 (D = 5) 8
        moves have 1.25x the ESS per CPU second of 4 (and of 16).
        """
        a = np.asarray(params["alpha"], dtype=np.float64).reshape(self.parts)
        A = np.maximum(zeta(2.0, a) - float(zeta(2.0, a.sum())), 1e-300) / float(n)
        r = float(np.max(np.broadcast_to(np.asarray(noise_var, dtype=np.float64),
                                         (self.parts,)) / A))
        k = (max(self.MOVES_WHEN_NOISY, self.MOVES_PER_FREE_PART * (self.parts - 1))
             if r >= self.NOISY_RATIO else 0)
        return k, (f"noise / sampling variance of the released mean logs {r:.3g} "
                   f"{'>=' if k else '<'} {self.NOISY_RATIO:g}, Dirichlet.interweave_auto_steps")

    #: ``default_warmup``: damcmc's warm-up (iterations per chain) for this model's releases
    WARMUP = 300

    def default_warmup(self, release) -> int:
        """damcmc's (and so dpmcmc's) warm-up when the user gives none: :data:`WARMUP` = 300
        iterations per chain, for every release this model takes (a CensoredLogMean release:
        ATUS, seed 002's DPss D2).

        Why 300 and not damcmc's 1000: the chains start from the data (``start="data"``: the
        release's plug-in alpha, dispersed), so the warm-up has only to adapt the non-centred
        move's proposal (4-8 moves per iteration: 1,200-2,400 adaptation steps in 300
        iterations) and forget the start; the until-converged rule (split R-hat <= 1.01,
        bulk/tail ESS >= 400) still judges every run. Measured (benchmarks/README.md, "ATUS and
        DPMCMCp1, the fused Dirichlet step" and "A per-model default warm-up"): on the four
        ATUS releases (eps 1 and 10, female and male) and DPMCMCp1 (alpha5, n = 5000,
        eps = 1.5) every default run with 300 converged (seeds 1-3; 1-6 at ATUS eps = 1), its
        posterior means agree with the warm-up-1000 runs' within Monte Carlo error, and the
        CPU per run is 0.55-0.67x (ATUS female eps = 1 and eps = 10, DPMCMCp1: the warm-up was
        most of the first round), except ATUS male eps = 1 at 1.09x (more runs need a second,
        longer round of draws)."""
        return self.WARMUP

    def interweave_to_free(self, params):
        """``log(alpha)``, shape ``(D,)``."""
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(params["alpha"], dtype=np.float64))

    def interweave_from_free(self, params, v):
        """``{**params, "alpha": exp(v)}`` (``alpha`` shape ``(D,)``; overflow gives ``inf``,
        whose prior density is 0)."""
        with np.errstate(over="ignore"):
            return {**params, "alpha": np.exp(np.asarray(v, dtype=np.float64))}

    def interweave_log_jacobian(self, params):
        """``log |d alpha / d log alpha| = sum_j log alpha_j``."""
        with np.errstate(divide="ignore"):
            return float(np.log(np.asarray(params["alpha"], dtype=np.float64)).sum())

    def compiled_model(self):
        """Numba update/simulate for compiled DA-MCMC (univariate slice sampler with the
        independent Gamma prior; ``None`` for the copula prior or ``slice_method="hyperrect"``),
        with the non-centred move above compiled (models/_compiled_dirichlet_move.py)."""
        from privpost.models import _compiled
        return _compiled.dirichlet(self)

    # ------------------------------------------------------------------ data-driven start
    def plugin_params(self, query, s, n, rng):
        """A start for damcmc (:mod:`privpost.inference._start`): Minka's MLE of the released
        mean logs ``s`` (``(D,)``, CensoredLogMean; the censoring is ignored), or ``None`` when
        the query is another one or the MLE does not exist (``sum exp(s) >= 1``)."""
        if getattr(query, "name", None) != "censored_log_mean":
            return None
        a = dirichlet_mle(np.asarray(s, dtype=np.float64).reshape(self.parts))
        if not np.all(np.isfinite(a) & (a > 0)):
            return None
        return {"alpha": a}

    # ------------------------------------------------------------------ checks
    def validate_records(self, records):
        arr = np.asarray(records)
        D = self.parts
        if arr.ndim != 2 or arr.shape[1] != D:
            raise DataError(f"model {self.name!r} takes compositional records of shape (n, {D}), "
                            f"got shape {arr.shape}")
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise DataError(f"model {self.name!r}: records must be numeric") from None
        if not np.all(np.isfinite(arr)):
            raise DataError(f"model {self.name!r}: records contain NaN or infinite values")
        if not np.all(arr > 0):
            raise DataError(f"model {self.name!r}: every component must be > 0 (the Dirichlet "
                            "density is zero on the boundary of the simplex; replace zeros first)")
        if arr.size and not np.allclose(arr.sum(axis=1), 1.0, rtol=0, atol=1e-6):
            raise DataError(f"model {self.name!r}: rows must sum to 1 (normalise the compositions)")
        return arr

    def check_query(self, query):
        self._require_kind(query, {"censoredlogmean": "CensoredLogMean"})
        D = query_attr(query, "parts", "d", "dim")
        if D is not None and int(D) != self.parts:
            raise self._incompatible(query, f"CensoredLogMean with parts = {self.parts}",
                                     f"the query has {D} parts, the model {self.parts}")
