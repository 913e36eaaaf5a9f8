"""DPapprox of seed 002 (Sec. 3.3.4, extract §2.10): CLT Gibbs in the Bernstein-Sheldon style.

Model (6): ``s_L | s0 ~ prod_j Laplace(s0_j, lambda)``, ``s0 | alpha ~ N(mu_alpha,
Sigma_alpha / N)`` with ``mu_alpha = Psi(alpha) - Psi(alpha_0)`` and ``Sigma_alpha =
diag(Psi_1(alpha)) - Psi_1(alpha_0) 1 1^T`` (the per-record covariance of ``log x``; **divided by
N**, which the paper omits -- extract pitfall 11), prior on alpha. Censoring is ignored (the
model is for the uncensored mean-log), by design of the seed. Gibbs sweep:

1. ``1/sigma_j^2 ~ InverseGaussian(mean = 1/(lambda |s_L,j - s0_j|), shape = 1/lambda^2)``
   (Laplace as a normal scale mixture with ``sigma^2 ~ Exp(rate 1/(2 lambda^2))``, Park &
   Casella 2008);
2. ``s0 ~ N(m, V)``, ``V = (N Sigma^-1 + Lambda)^-1``, ``m = V (N Sigma^-1 mu + Lambda s_L)``,
   ``Lambda = diag(1/sigma^2)``;
3. then ``(alpha, s0)`` jointly given ``sigma^2`` (a blocked, collapsed step: plain Gibbs
   between ``s0`` and ``alpha`` mixes very slowly because ``s0 | alpha`` has covariance
   ``Sigma_alpha / N``): ``mh_steps`` random-walk Metropolis steps on ``log(alpha)`` for the
   marginal ``N(s_L | mu_alpha, Sigma_alpha/N + diag(sigma^2)) pi_0(alpha)`` (Jacobian
   included; ``s0`` integrated out), then ``s0 | alpha, sigma^2`` as in step 2.
   The step size adapts (Robbins-Monro towards acceptance 0.3) during warm-up only; halfway
   through warm-up the proposal takes the covariance of the warm-up draws (the posterior of
   ``log alpha`` is elongated along the concentration ``alpha_0``); fixed after warm-up.

The sweep leaves ``p(alpha, s0, sigma^2 | s_L)`` invariant, so the alpha draws target model (6).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, zeta

from privpost._rng import spawn
from privpost.inference._gibbs_common import (Progress, check_sampler_options, make_posterior,
                                              reject_unknown)
from privpost.inference.dirichlet_tools import dirichlet_mle


def _trigamma(x):
    """Psi_1(x) = zeta(2, x) (scipy's polygamma is a slow Python wrapper)."""
    return zeta(2, x)


__all__ = ["run_dpapprox", "clt_loglik"]


def clt_loglik(s0, alpha, N, extra_var=None) -> float:
    """``log N(s0 | mu_alpha, Sigma_alpha / N + diag(extra_var))`` (full normalising constant)."""
    a = np.asarray(alpha, dtype=np.float64)
    mu = digamma(a) - digamma(a.sum())
    S = np.diag(_trigamma(a)) - _trigamma(a.sum())
    S = S / N
    if extra_var is not None:
        S = S + np.diag(extra_var)
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return -math.inf
    r = np.linalg.solve(L, np.asarray(s0) - mu)
    return float(-0.5 * r @ r - np.log(np.diag(L)).sum() - 0.5 * a.size * math.log(2 * math.pi))


def _log_target(u, sL, N, model, var):
    if not np.all(np.abs(u) < 700):
        return -math.inf
    a = np.exp(u)
    lp = model.log_prior({"alpha": a})
    if not np.isfinite(lp):
        return -math.inf
    return clt_loglik(sL, a, N, var) + lp + float(u.sum())


def _chain(model, sL, lam, N, draws, warmup, mh_steps, rng, bar, offset):
    D = sL.size
    a0 = dirichlet_mle(sL)
    u = np.log(a0) if np.all(np.isfinite(a0)) else np.log(model.prior_sample(rng)["alpha"])
    s0 = sL.copy()
    log_step = math.log(0.5 / math.sqrt(D))
    C = np.eye(D)
    hist = []
    out = np.empty((draws, D))
    acc = np.empty(draws)
    for it in range(warmup + draws):
        e = np.maximum(np.abs(sL - s0), 1e-300)
        with np.errstate(over="ignore", invalid="ignore"):
            prec = rng.wald(1.0 / (lam * e), 1.0 / lam ** 2)
        # at eps ~ 1e10 the mean 1/(lam e) overflows and numpy returns nan: the noise is ~0
        prec = np.clip(np.nan_to_num(prec, nan=1e300, posinf=1e300), 1e-300, 1e300)
        var = 1.0 / prec
        lt = _log_target(u, sL, N, model, var)
        n_acc = 0
        for _ in range(mh_steps):
            prop = u + math.exp(log_step) * (C @ rng.standard_normal(D))
            lp = _log_target(prop, sL, N, model, var)
            ok = math.log(1.0 - rng.random()) < lp - lt
            if ok:
                u, lt = prop, lp
                n_acc += 1
            if it < warmup:
                log_step += (float(ok) - 0.3) / math.sqrt(it + 1.0)
        a = np.exp(u)
        mu = digamma(a) - digamma(a.sum())
        Sig = np.diag(_trigamma(a)) - _trigamma(a.sum())
        P = N * np.linalg.inv(Sig)
        Vinv = P + np.diag(prec)
        Lv = np.linalg.cholesky(Vinv)
        m = np.linalg.solve(Vinv, P @ mu + prec * sL)
        s0 = m + np.linalg.solve(Lv.T, rng.standard_normal(D))
        if it < warmup:
            hist.append(u.copy())
            if it + 1 == warmup // 2 and warmup >= 40:   # full covariance from the first half
                win = np.array(hist[len(hist) // 2:])
                # only if the chain moved enough to estimate it (a chain stuck during the
                # window would give a ~0 covariance and freeze the rest of the run)
                if len(np.unique(win, axis=0)) >= max(10, 2 * D):
                    cov = np.cov(win, rowvar=False) + 1e-10 * np.eye(D)
                    C = np.linalg.cholesky(cov)
                    log_step = math.log(2.38 / math.sqrt(D))
        j = it - warmup
        if j >= 0:
            out[j] = np.exp(u)
            acc[j] = n_acc / mh_steps
        bar.update(offset + it)
    return out, acc


def run_dpapprox(model, release, *, prior: str = "p1", draws: int = 1000, warmup: int = 1000,
                 chains: int = 4, mh_steps: int = 3, seed=None, progress: bool = False,
                 prior_draws: int = 2000, **options):
    """DPapprox p1/p3/p4 on a DPss release (see the module docstring).

    Returns a Posterior with ``alpha`` ``(chains, draws, D)`` and ``accept_rate`` of the alpha
    MH steps; ``exact=False``.
    """
    from privpost.inference.compositional import _setup
    from privpost.inference.compositional_priors import build_prior

    reject_unknown("dpapprox", options)
    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    if isinstance(mh_steps, bool) or not isinstance(mh_steps, int) or mh_steps < 1:
        from privpost.errors import PrivpostError
        raise PrivpostError(f"mh_steps must be an integer >= 1, got {mh_steps!r}")
    dpss, rel, notes = _setup("dpapprox", model, release, prior)
    rngs = spawn(seed, chains + 1)
    spec = build_prior(model, dpss, prior, rngs[-1], prior_draws=prior_draws)
    sL = np.asarray(rel.observed, dtype=np.float64)
    lam, N = float(rel.mechanism.scale), rel.n
    bar = Progress(chains * (warmup + draws), progress, "dpapprox")
    res = [_chain(spec.model, sL, lam, N, draws, warmup, mh_steps, rngs[c], bar,
                  c * (warmup + draws)) for c in range(chains)]
    alpha = np.stack([r[0] for r in res])
    acc = np.stack([r[1] for r in res])
    notes += spec.notes + [
        "dpapprox: approximation -- the mean-log statistic is modelled by its CLT normal "
        f"N(mu_alpha, Sigma_alpha / {N}) and the censoring at a = {dpss.threshold:g} is ignored "
        "(seed 002 model (6)); Laplace noise as a normal scale mixture (exact augmentation)"]
    return make_posterior({"alpha": alpha}, {"accept_rate": acc}, "dpapprox", model, release,
                          notes, exact=False)
