"""Exact private posterior of a tiny CliqueMRF given noisy marginal tables (test helper).

p(theta | y) ∝ p(theta) sum_h Mult(h; N, p_theta) prod_j g(y_j - (A h)_j), where h runs over all
histograms of N records over the joint states (compositions of N), A maps a histogram to the
clique tables, and g is the mechanism's noise density. Expectations under p(theta | y) are
computed by self-normalised importance sampling from the prior with this exact likelihood; the
IS standard error is the delta-method one. Nothing here but
:func:`check_damcmc_on_tiny_chain` (the check the tests share) uses damcmc or the model's update.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln, logsumexp

from _tolerance import K_MCSE


def compositions(N: int, k: int) -> np.ndarray:
    """All (h_1..h_k) >= 0 with sum N, shape (C(N+k-1, k-1), k)."""
    out = []
    for bars in itertools.combinations(range(N + k - 1), k - 1):
        b = (-1,) + bars + (N + k - 1,)
        out.append([b[i + 1] - b[i] - 1 for i in range(k)])
    return np.array(out, dtype=np.int64)


def design(model) -> tuple[np.ndarray, np.ndarray]:
    """Joint states (S, T) and their cell vectors (S, d), built by brute force."""
    dom = np.array(list(itertools.product(*[range(k) for k in model.levels])))
    D = np.stack([model.counts(x[None]) for x in dom])
    return dom, D


def log_evidence_terms(model, release, N):
    """(H, log_g): histograms (M, S) and log p(y | tables(h)) for each, shape (M,)."""
    dom, D = design(model)
    H = compositions(N, D.shape[0])
    tables = H @ D                                            # model's cell layout
    y = model.release_tables(release.query, release.observed)
    log_g = np.array([float(release.mechanism.logpdf(y, t)) for t in tables])
    return H, log_g, D


def is_posterior(model, release, f, *, draws=200_000, seed=0, batch=5000, prior_sd=None):
    """Self-normalised IS estimates of E[f(theta) | y] and their standard errors.

    f: (B, d) thetas -> (B, m) values. Returns (mean (m,), se (m,), ess).
    """
    N = int(release.n)
    H, log_g, D = log_evidence_terms(model, release, N)
    lmult = gammaln(N + 1) - gammaln(H + 1).sum(1)           # (M,)
    # theta enters only through the tables t = D'h (log p_theta(h) = theta't - N A(theta) +
    # log multinomial coefficient) and so does log_g: sum the histograms of each table first
    tables, inv = np.unique(H @ D, axis=0, return_inverse=True)
    inv = inv.ravel()
    base = lmult + log_g
    agg = np.full(tables.shape[0], -np.inf)
    np.logaddexp.at(agg, inv, base)
    rng = np.random.default_rng(seed)
    sd = model.prior_sd if prior_sd is None else prior_sd
    logw, vals = [], []
    for start in range(0, draws, batch):
        th = sd * rng.standard_normal((min(batch, draws - start), model.dim))
        lz = logsumexp(th @ D.T, axis=1, keepdims=True)        # (B, 1): log Z(theta)
        ll = logsumexp(agg[None, :] + th @ tables.T - N * lz, axis=1)       # (B,)
        logw.append(ll)
        vals.append(f(th))
    logw = np.concatenate(logw)
    vals = np.concatenate(vals)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ vals
    se = np.sqrt((w[:, None] ** 2 * (vals - mean) ** 2).sum(0))
    return mean, se, 1.0 / (w ** 2).sum()


def check_damcmc_on_tiny_chain(**infer_kw):
    """3 binary nodes (chain 0-1-2), N = 4, Laplace noise b = 2|C|/eps = 1: damcmc's posterior
    means of the 8 joint probabilities against the exact ones by importance sampling (all 330
    histograms of 4 records), |z| < K_MCSE against the joint Monte Carlo error; the wrong targets --
    the prior (1/8 each) and the posterior under the thesis's scale |C|/eps = 0.5 -- must be
    rejected (|z| > 8 and > K_MCSE). ``infer_kw`` go to ``pp.infer``; returns the posterior."""
    import math
    from types import SimpleNamespace

    import arviz as az

    import privpost as pp
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.mechanisms import Laplace
    from privpost.models import CliqueMRF

    model = CliqueMRF([2, 2, 2], [[0, 1], [1, 2]], prior_sd=1.5, n_leapfrog=4)
    q = MarginalTables([2, 2, 2], [[0, 1], [1, 2]])
    x = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 1], [1, 1, 1]])
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=4.0), seed=5)
    assert math.isclose(rel.mechanism.scale, 1.0, rel_tol=1e-12)
    _, D = design(model)

    def f(th):
        lp = th @ D.T
        lp -= lp.max(-1, keepdims=True)
        p = np.exp(lp)
        return p / p.sum(-1, keepdims=True)
    m, se, _ = is_posterior(model, rel, f, draws=40_000, seed=0)
    thesis = SimpleNamespace(query=rel.query, observed=rel.observed, n=rel.n,
                             mechanism=Laplace(scale=0.5))
    m_wrong, se_wrong, _ = is_posterior(model, thesis, f, draws=40_000, seed=1)

    post = pp.infer(model, rel, method="damcmc", **infer_kw)
    th = np.concatenate([post.draws[nm].reshape(post.draws[nm].shape[:2] + (-1,))
                         for nm in model.names], axis=-1)
    vals = f(th)
    z, z_thesis, z_prior = [], [], []
    for j in range(8):
        d = vals[..., j]
        se_mc = d.std() / math.sqrt(float(az.ess(np.atleast_2d(d), method="mean")))
        z.append((d.mean() - m[j]) / math.hypot(se_mc, se[j]))
        z_thesis.append((d.mean() - m_wrong[j]) / math.hypot(se_mc, se_wrong[j]))
        z_prior.append((d.mean() - 1 / 8) / se_mc)
    assert max(map(abs, z)) < K_MCSE, z
    assert max(map(abs, z_prior)) > 8, z_prior
    assert max(map(abs, z_thesis)) > K_MCSE, z_thesis
    return post
