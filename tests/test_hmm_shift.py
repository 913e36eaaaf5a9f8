"""The residual-shift move of the HMM count latent with its learnt proposal
(:func:`privpost.inference._hmm_core.shift_moves`, :mod:`privpost.inference._hmm_shift`).

The kernel alone, on one state's emissions over two cells (one feature, 3 levels, cell sizes 3
and 2, Laplace noise on every count): a chain alternating the exact count sweep
(:func:`~privpost.inference._hmm_core.count_sweep`, which moves the counts given theta) with the
shift move (the only move of theta) must have the law ``p(theta, n | obs)``, whose moments are
computed exactly by enumerating the count tables with theta integrated out (Dirichlet-
multinomial): ``E[theta_j]``, ``E[theta_j^2]``, ``E[n_cj]``. Two proposals:

* the independence proposal (multivariate t around a deliberately off-centre mean), with the
  wrong variant that drops its proposal ratio ``q(v) / q(v')`` (``qratio=0``), which must fail;
* the random walk with a full (correlated) Cholesky factor;
* the thinning moves (:func:`~privpost.inference._hmm_core.thin_moves`, the only move of
  theta there), anchored at the last and at the first level, with the wrong variant that drops
  the Jacobian ``s`` (``jac=0``), which must fail.

Tolerance ``|z| < K_MCSE`` (tests/_tolerance.py) against the ESS-based MCSE of each bounded
statistic; the wrong variant ``|z| > 2 K_MCSE``. The learnt proposal inside the whole sampler is
covered by tests/test_hmm_counts.py (enumeration of the tiny HMM, default options: it learns
and then uses the proposal), and the learning itself (windows, freeze, determinism) here.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import gammaln

from privpost.inference import _hmm_core as core
from privpost.inference._hmm_shift import ShiftProposal

sys.path.insert(0, str(Path(__file__).parent))
from _tolerance import K_MCSE  # noqa: E402
from test_hmm import _mcse_z  # noqa: E402

SIZES = np.array([3.0, 2.0])
J = 3
BETA = 1.0
SCALE = 0.7
OBS = np.array([[1.4, 0.2, 1.9], [-0.3, 1.6, 0.4]])


def _compositions(N, J):
    for cut in itertools.combinations(range(N + J - 1), J - 1):
        b = (-1,) + cut + (N + J - 1,)
        yield np.array([b[i + 1] - b[i] - 1 for i in range(J)], dtype=float)


def _exact():
    """``E[theta_j]``, ``E[theta_j^2]`` (J,) and ``E[n_cj]`` (2, J) by enumeration."""
    logw, items = [], []
    for n1 in _compositions(3, J):
        for n2 in _compositions(2, J):
            S = n1 + n2
            a = BETA + S
            lw = (gammaln(4) - gammaln(n1 + 1).sum() + gammaln(3) - gammaln(n2 + 1).sum()
                  + gammaln(a).sum() - gammaln(a.sum())
                  - (np.abs(OBS[0] - n1).sum() + np.abs(OBS[1] - n2).sum()) / SCALE)
            A = a.sum()
            logw.append(lw)
            items.append((a / A, a * (a + 1) / (A * (A + 1)), np.stack([n1, n2])))
    w = np.exp(np.array(logw) - max(logw))
    w /= w.sum()
    return tuple(sum(wi * it[i] for wi, it in zip(w, items)) for i in range(3))


def _chain(seed, *, chol, mean, indep, logstep, reps, qratio=1.0, iters=6000):
    rng = np.random.default_rng(seed)
    z = np.zeros((1, 2), dtype=np.int64)
    off = np.array([0], dtype=np.int64)
    levels = np.array([J], dtype=np.int64)
    use = np.ones(2, dtype=np.int64)
    theta = np.full((1, J), 1.0 / J)
    counts = np.stack([rng.multinomial(int(N), theta[0]) for N in SIZES]).astype(float)
    stats = np.zeros(6)
    logstep = np.array([[logstep]])
    out_t, out_n = np.empty((iters, J)), np.empty((iters, 2, J))
    for i in range(iters):
        core.count_sweep(z, np.log(theta), off, levels, counts, OBS, 1.0 / SCALE, False, use,
                         1, rng)
        core.shift_moves(z, theta, counts, OBS, off, levels, SIZES, 1.0 / SCALE, False, use,
                         BETA, logstep, False, stats, rng, reps, chol, mean, indep, qratio)
        out_t[i], out_n[i] = theta[0], counts
    return out_t, out_n, stats


def _zs(seed, **kw):
    runs = [_chain(seed + c, **kw) for c in range(4)]
    th = np.stack([r[0] for r in runs])          # (chains, draws, J)
    n = np.stack([r[1] for r in runs])           # (chains, draws, 2, J)
    m1, m2, mn = _exact()
    zs = [_mcse_z(th[..., j], m1[j]) for j in range(J)]
    zs += [_mcse_z(th[..., j] ** 2, m2[j]) for j in range(J)]
    zs += [_mcse_z(n[..., c, j], mn[c, j]) for c in range(2) for j in range(J)]
    return np.array(zs), np.stack([r[2] for r in runs])


def test_independence_proposal_keeps_the_exact_law_and_its_ratio_matters():
    chol = np.zeros((1, 1, J - 1, J - 1))
    chol[0, 0] = np.diag([0.7, 0.7])
    mean = np.array([[[1.2, -1.0]]])       # off-centre on purpose: the ratio must correct it
    kw = dict(chol=chol, mean=mean, indep=np.ones((1, 1), dtype=np.int64), logstep=-30.0,
              reps=2)
    zs, stats = _zs(100, **kw)
    rate = stats[:, 5] / stats[:, 4]
    assert np.all((rate > 0.02) & (rate < 0.95)), rate          # the proposal does move theta
    assert np.max(np.abs(zs)) < K_MCSE, zs
    wrong, _ = _zs(200, qratio=0.0, **kw)
    assert np.max(np.abs(wrong)) > 2 * K_MCSE, wrong


def test_random_walk_with_a_full_cholesky_factor_keeps_the_exact_law():
    chol = np.zeros((1, 1, J - 1, J - 1))
    chol[0, 0] = [[1.0, 0.0], [0.8, 0.6]]
    zs, stats = _zs(300, chol=chol, mean=np.zeros((1, 1, J - 1)),
                    indep=np.zeros((1, 1), dtype=np.int64), logstep=np.log(0.8), reps=1)
    rate = stats[:, 1] / stats[:, 0]
    assert np.all((rate > 0.05) & (rate < 0.95)), rate
    assert np.max(np.abs(zs)) < K_MCSE, zs


def test_proposal_learns_in_windows_and_freezes():
    levels = np.array([3, 2])
    offsets = np.array([0, 3])
    sp = ShiftProposal(2, levels)
    rng = np.random.default_rng(0)
    cov = np.array([[0.04, 0.03], [0.03, 0.09]])
    Lt = np.linalg.cholesky(cov)
    for i in range(100):          # windows of 25, 25 and 50 iterations complete
        v = np.array([0.5, -0.2]) + Lt @ rng.standard_normal(2)
        th1 = np.exp(np.append(v, 0.0))
        th1 /= th1.sum()
        theta = np.tile(np.concatenate([th1, [0.3, 0.7]]), (2, 1))
        sp.learn(theta, offsets)
        if i == 48:
            assert not sp.indep.any()          # windows of 25 only: random walk only
    assert sp.indep.all()
    S = sp.chol[0, 0] @ sp.chol[0, 0].T
    # the 50-iteration window's estimate (shrunk 5/55 towards its diagonal)
    assert np.allclose(S, cov, rtol=0.6, atol=0.02), S
    assert np.isclose(sp.logstep[0, 0], np.log(2.38 / np.sqrt(2)))
    assert np.isclose(sp.chol[0, 1, 0, 0], 1e-5, rtol=1e-3)   # feature 2 constant: the ridge
    sp.freeze()
    before = sp.chol.copy()
    sp.learn(theta * 0 + np.tile([0.1, 0.1, 0.8, 0.5, 0.5], (2, 1)), offsets)
    assert np.array_equal(before, sp.chol)       # frozen: no more learning


@pytest.mark.parametrize("bad", [0.0])
def test_a_zero_probability_learns_nothing(bad):
    sp = ShiftProposal(1, np.array([2]))
    sp.learn(np.array([[bad, 1.0]]), np.array([0]))
    assert sp._n == 0


def _thin_chain(seed, *, jac=1.0, iters=6000, anchor=2, sigma=0.8):
    """count sweep + thinning moves only (the only move of theta)."""
    rng = np.random.default_rng(seed)
    z = np.zeros((1, 2), dtype=np.int64)
    off = np.array([0], dtype=np.int64)
    levels = np.array([J], dtype=np.int64)
    use = np.ones(2, dtype=np.int64)
    theta = np.full((1, J), 1.0 / J)
    counts = np.stack([rng.multinomial(int(N), theta[0]) for N in SIZES]).astype(float)
    stats = np.zeros(8)
    logstep = np.full((1, J), np.log(sigma))
    anch = np.array([[anchor]], dtype=np.int64)
    out_t, out_n = np.empty((iters, J)), np.empty((iters, 2, J))
    for i in range(iters):
        core.count_sweep(z, np.log(theta), off, levels, counts, OBS, 1.0 / SCALE, False, use,
                         1, rng)
        core.thin_moves(z, theta, counts, OBS, off, levels, SIZES, 1.0 / SCALE, False, use,
                        BETA, logstep, anch, False, stats, rng, jac)
        out_t[i], out_n[i] = theta[0], counts
    return out_t, out_n, stats


def _thin_zs(seed, **kw):
    runs = [_thin_chain(seed + c, **kw) for c in range(4)]
    th = np.stack([r[0] for r in runs])
    n = np.stack([r[1] for r in runs])
    m1, m2, mn = _exact()
    zs = [_mcse_z(th[..., j], m1[j]) for j in range(J)]
    zs += [_mcse_z(th[..., j] ** 2, m2[j]) for j in range(J)]
    zs += [_mcse_z(n[..., c, j], mn[c, j]) for c in range(2) for j in range(J)]
    return np.array(zs), np.stack([r[2] for r in runs])


@pytest.mark.parametrize("anchor", [2, 0])
def test_thinning_moves_keep_the_exact_law_and_the_jacobian_matters(anchor):
    zs, stats = _thin_zs(400 + 10 * anchor, anchor=anchor)
    rate = stats[:, 7] / stats[:, 6]
    assert np.all((rate > 0.05) & (rate < 0.95)), rate
    assert np.all(stats[:, 6] == 6000 * (J - 1))
    assert np.max(np.abs(zs)) < K_MCSE, zs
    if anchor == 2:
        wrong, _ = _thin_zs(500, anchor=anchor, jac=0.0, sigma=2.0, iters=12000)   # s left out
        assert np.max(np.abs(wrong)) > 2 * K_MCSE, wrong
