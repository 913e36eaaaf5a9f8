"""Latent noisy cell sizes (issue 23, Deliver 4): the birth/death move of
:mod:`privpost.inference._hmm_sizes`, with the pair moves of ``count_sweep``, against the exact
conditional ``p(N, n | z, theta, released)`` by enumeration on a tiny case (2 cells, 2 features
of 2 levels, ``N <= 6`` under a truncated flat prior; and a Poisson prior truncated only by the
enumeration's reach, far in its tail), each with wrong variants that must fail.

Tolerances: |z| < K_MCSE (tests/_tolerance.py) with MCSE from the ArviZ ESS over 4 chains; a
wrong variant must have |z| > K_MCSE + 4.6 (any seed passes), checked against the exact
distributions of both variants below.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln

from privpost.inference._hmm_core import count_sweep
from privpost.inference._hmm_sizes import size_moves

from _tolerance import K_MCSE  # noqa: E402
from test_damcmc import z_cdf, z_mean

Z = np.array([[0, 1]], dtype=np.int64)                    # 1 region, 2 times, states 0 and 1
THETA = np.array([[0.7, 0.3, 0.4, 0.6],
                  [0.2, 0.8, 0.5, 0.5]])                  # (K=2, W=4): 2 features x 2 levels
OFF = np.array([0, 2], dtype=np.int64)
LEVELS = np.array([2, 2], dtype=np.int64)
OBS = np.array([[2.3, 0.4, 1.1, 2.0],
                [0.2, 1.7, 1.5, 0.0]])                    # noisy counts (C=2, W=4)
OBS_SIZE = np.array([3.0, 2.0])                           # noisy sizes (discrete Laplace)


def _log_eta(e, w, l2):
    return -w * e * e if l2 else -w * abs(e)


def exact(c, *, w, l2, w_size, l2_size, log_prior, n_max):
    """Exact joint pmf of (N_c, n[c, 0], n[c, 2]) by enumeration: dict -> probability."""
    th = THETA[Z.ravel()[c]]
    logp = {}
    for N in range(n_max + 1):
        lp0 = log_prior(N) + _log_eta(OBS_SIZE[c] - N, w_size, l2_size)
        for a in range(N + 1):
            for b in range(N + 1):
                lp = lp0
                for (x, p, col) in ((a, th[0], 0), (b, th[2], 2)):
                    lp += (gammaln(N + 1) - gammaln(x + 1) - gammaln(N - x + 1)
                           + x * math.log(p) + (N - x) * math.log(1 - p))
                    lp += _log_eta(OBS[c, col] - x, w, l2) + _log_eta(OBS[c, col + 1] - (N - x), w, l2)
                logp[(N, a, b)] = lp
    m = max(logp.values())
    tot = sum(math.exp(v - m) for v in logp.values())
    return {key: math.exp(v - m) / tot for key, v in logp.items()}


def marginal(pmf, idx):
    out = {}
    for key, p in pmf.items():
        out[key[idx]] = out.get(key[idx], 0.0) + p
    return out


def run(*, w, l2, w_size, l2_size, prior_kind, prior_par, chains=4, draws=6000, kmax=2, seed=0,
        theta_birth=THETA):
    """Draws (chains, draws, C, 3) of (N_c, n[c, 0], n[c, 2]) from count_sweep + size_moves.

    ``theta_birth``: the emissions size_moves draws new units from (the wrong variant that
    leaves the proposal's terms out of the ratio passes other ones than the target's)."""
    ss = np.random.SeedSequence(seed)
    logtheta = np.log(THETA)
    use = np.ones(2, dtype=np.int64)
    out = np.empty((chains, draws, 2, 3))
    for ch, child in enumerate(ss.spawn(chains)):
        rng = np.random.default_rng(child)
        sizes = np.maximum(np.round(OBS_SIZE), 0.0)
        counts = np.zeros((2, 4))
        for c in range(2):
            th = THETA[Z.ravel()[c]]
            for d in range(2):
                counts[c, 2 * d:2 * d + 2] = rng.multinomial(int(sizes[c]), th[2 * d:2 * d + 2])
        for it in range(draws + 200):
            count_sweep(Z, logtheta, OFF, LEVELS, counts, OBS, w, l2, use, 1, rng)
            size_moves(Z, theta_birth, OFF, LEVELS, counts, sizes, OBS, OBS_SIZE, w, l2, w_size,
                       l2_size, prior_kind, prior_par, kmax, 1, use, rng)
            if it >= 200:
                out[ch, it - 200, :, 0] = sizes
                out[ch, it - 200, :, 1] = counts[:, 0]
                out[ch, it - 200, :, 2] = counts[:, 2]
    assert np.all(out[..., 1] <= out[..., 0]) and np.all(out[..., 2] <= out[..., 0])
    return out


def zs(draws, pmfs):
    """z-scores of the mean of N_c, n[c,0], n[c,2] and P(N_c <= median) for both cells."""
    res = {}
    for c, pmf in enumerate(pmfs):
        for i, name in enumerate(("N", "n0", "n2")):
            m = marginal(pmf, i)
            mean = sum(k * p for k, p in m.items())
            res[f"{name}[{c}] mean"] = z_mean(draws[:, :, c, i], mean)
        mN = marginal(pmf, 0)
        acc = 0.0
        for k in sorted(mN):
            acc += mN[k]
            if acc >= 0.5:
                break
        if 0.02 < acc < 0.98:
            res[f"N[{c}] cdf({k})"] = z_cdf(draws[:, :, c, 0], k, acc)
    return res


FLAT6 = dict(w=1.0, l2=False, w_size=1.0, l2_size=False)


def test_flat_truncated_prior_matches_enumeration():
    pmfs = [exact(c, **FLAT6, log_prior=lambda N: 0.0, n_max=6) for c in range(2)]
    draws = run(**FLAT6, prior_kind=0, prior_par=6.0)
    assert draws[..., 0].max() <= 6
    z = zs(draws, pmfs)
    assert all(abs(v) < K_MCSE for v in z.values()), z


@pytest.mark.parametrize("wrong", ["size scale x2", "poisson prior", "no size noise term",
                                   "birth proposal term missing"])
def test_flat_truncated_wrong_variants_fail(wrong):
    pmfs = [exact(c, **FLAT6, log_prior=lambda N: 0.0, n_max=6) for c in range(2)]
    kw = dict(FLAT6, prior_kind=0, prior_par=6.0)
    if wrong == "size scale x2":              # sampler told t_N = 2 (true: 1); expected max |z|
        kw.update(w_size=0.5, draws=12000)    # about 12 at 6000 draws, 17 at 12000
    elif wrong == "birth proposal term missing":
        # births draw levels uniformly but the ratio still assumes they come from theta (the
        # q_b(a) / theta^a terms left out); expected max |z| about 11 at 6000 draws
        kw.update(theta_birth=np.full_like(THETA, 0.5), draws=12000)
    elif wrong == "poisson prior":            # sampler with a Poisson(1) prior, target flat
        kw.update(prior_kind=1, prior_par=1.0)
    else:                                     # the size noise density left out of the ratio
        kw["w_size"] = 0.0
    z = zs(run(**kw), pmfs)
    assert max(abs(v) for v in z.values()) > K_MCSE + 4.6, z


def test_poisson_prior_l2_kernels_match_enumeration():
    """Gaussian count noise (sd 1), discrete Gaussian size noise (sigma 1.5), Poisson(2.5)."""
    kw = dict(w=0.5, l2=True, w_size=1.0 / (2 * 1.5 ** 2), l2_size=True)
    lam = 2.5
    pmfs = [exact(c, **kw, log_prior=lambda N: N * math.log(lam) - math.lgamma(N + 1),
                  n_max=25) for c in range(2)]
    draws = run(**kw, prior_kind=1, prior_par=lam, kmax=3)
    z = zs(draws, pmfs)
    assert all(abs(v) < K_MCSE for v in z.values()), z


def test_flat_untruncated_prior_is_proper_and_matches_enumeration():
    """Flat on all of 0, 1, 2, ...: proper through the size noise; enumeration to N = 30 (the
    mass beyond is below exp(-25))."""
    pmfs = [exact(c, **FLAT6, log_prior=lambda N: 0.0, n_max=30) for c in range(2)]
    assert all(sum(p for k, p in pm.items() if k[0] >= 25) < 1e-8 for pm in pmfs)
    draws = run(**FLAT6, prior_kind=0, prior_par=math.inf, kmax=3, seed=5)
    z = zs(draws, pmfs)
    assert all(abs(v) < K_MCSE for v in z.values()), z


def test_held_out_cells_are_not_touched():
    rng = np.random.default_rng(1)
    counts = np.array([[2.0, 1.0, 1.0, 2.0], [0.0, 2.0, 1.0, 1.0]])
    sizes = np.array([3.0, 2.0])
    use = np.array([0, 1], dtype=np.int64)
    before = counts.copy()
    acc, prop = size_moves(Z, THETA, OFF, LEVELS, counts, sizes, OBS, OBS_SIZE, 1.0, False, 1.0,
                           False, 0, math.inf, 2, 50, use, rng)
    assert prop == 50 and 0 < acc <= 50
    assert np.array_equal(counts[0], before[0]) and sizes[0] == 3.0
    assert counts[1, :2].sum() == sizes[1] == counts[1, 2:].sum() and counts.min() >= 0
