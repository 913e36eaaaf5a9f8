"""The split-merge moves of the HMM states (:mod:`privpost.inference._hmm_split`).

The kernel alone, on fixed counts of a tiny grid (2 regions x 3 times, K = 3 labels, features
with 3 and 2 levels, one held-out cell and one cell without counts): a chain made only of
split-merge moves must have the law ``p(z | n)`` with ``A`` and ``theta`` integrated out, which
is computed here independently (SciPy ``gammaln``) by enumerating the ``3^6`` paths. Checked:
``P(z_a == z_b)`` for every pair of cells (label-invariant), the number of labels in use, and
``P(z_c == 0)`` for every cell (label-dependent: the moves also swap labels). Tolerance ``|z| <
K_MCSE`` (tests/_tolerance.py) against the ESS-based MCSE of each indicator. The wrong variant
that leaves the proposal ratio ``q(z) / q(z')`` out of the MH ratio must fail (worst ``|z| >
2 K_MCSE``). The moves inside the whole sampler (``split_merge=``) are covered against the
enumerations of tests/test_hmm.py and tests/test_hmm_counts.py below.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import gammaln

from privpost.inference import _hmm_core as core
from privpost.inference._hmm_split import log_collapsed, split_merge_moves

sys.path.insert(0, str(Path(__file__).parent))
from _tolerance import K_MCSE  # noqa: E402
from test_hmm import _mcse_z  # noqa: E402

pytestmark = pytest.mark.statistical

R, T, K = 2, 3, 3
OFF = np.array([0, 3], dtype=np.int64)
LEVELS = np.array([3, 2], dtype=np.int64)
ALPHA, BETA = 0.7, 1.0
# two kinds of cells (level 0 / level 2 of the first feature), cell 4 held out, cell 5 empty
COUNTS = np.array([[4, 0, 1, 3, 2],
                   [3, 1, 0, 4, 0],
                   [0, 1, 4, 1, 4],
                   [1, 0, 3, 2, 2],
                   [2, 2, 2, 3, 3],
                   [0, 0, 0, 0, 0]], dtype=float)
USE = np.array([1, 1, 1, 1, 0, 1], dtype=np.int64)


def _log_dm(x, c):
    return gammaln(len(x) * c) - gammaln(len(x) * c + x.sum()) + (gammaln(c + x) - gammaln(c)).sum()


def _exact_logp(zf):
    """log p(z | n) + const by the formula (A and theta integrated), independently coded."""
    z = zf.reshape(R, T)
    ntr = np.zeros((K + 1, K))
    for r in range(R):
        prev = K
        for t in range(T):
            ntr[prev, z[r, t]] += 1
            prev = z[r, t]
    v = sum(_log_dm(row, ALPHA) for row in ntr)
    for k in range(K):
        S = COUNTS[(zf == k) & (USE == 1)].sum(axis=0)
        v += _log_dm(S[:3], BETA) + _log_dm(S[3:], BETA)
    return v


def _features(zf):
    """Indicators ``(15 pairs, labels in use, 6 cells at label 0)`` of a path ``zf (..., 6)``."""
    pairs = [(zf[..., a] == zf[..., b]) for a, b in itertools.combinations(range(R * T), 2)]
    used = sum((zf == k).any(axis=-1) for k in range(K))
    return np.stack(pairs + [used] + [zf[..., c] == 0 for c in range(R * T)], axis=-1).astype(float)


def _exact(fixed=True):
    """Exact expectations of :func:`_features` under ``p(z | n)``; ``fixed``: conditional on
    ``z_4 = z_5 = 0`` (the kernel alone never moves the held-out cell 4 nor the cell 5 without
    counts, and the chains start at ``z = 0``). Also returns the paths and their log weights."""
    paths = np.array(list(itertools.product(range(K), repeat=R * T)))
    if fixed:
        paths = paths[(paths[:, 4] == 0) & (paths[:, 5] == 0)]
    lw = np.array([_exact_logp(p) for p in paths])
    w = np.exp(lw - lw.max())
    w /= w.sum()
    return w @ _features(paths), paths, lw


def test_log_collapsed_matches_the_formula():
    _, paths, lw = _exact(fixed=False)
    mine = np.array([log_collapsed(p.reshape(R, T), COUNTS, OFF, LEVELS, BETA, ALPHA, USE, K)
                     for p in paths[::7]])
    d = mine - lw[::7]
    assert np.ptp(d) < 1e-9


def _run(seed, exact_ratio=True, chains=4, iters=5000):
    out = np.empty((chains, iters, R * T), dtype=np.int64)
    stats = np.zeros(3)
    for ch in range(chains):
        rng = np.random.default_rng([seed, ch])
        z = np.zeros((R, T), dtype=np.int64)
        for s in range(iters):
            split_merge_moves(z, K, COUNTS, OFF, LEVELS, BETA, ALPHA, USE, 1, stats, rng,
                              exact_ratio)
            out[ch, s] = z.ravel()
    return out, stats


def _worst_z(out, exact):
    f = _features(out)                         # (chains, iters, n_features)
    return max(abs(_mcse_z(f[..., j], exact[j])) for j in range(f.shape[-1])
               if np.ptp(f[..., j]) > 0 or not np.isclose(f[0, 0, j], exact[j], rtol=0, atol=1e-12))


@pytest.mark.parametrize("seed", [1, 2])
def test_split_merge_kernel_keeps_the_collapsed_law(seed):
    exact, _, _ = _exact()
    out, stats = _run(seed)
    # the kernel moves: merges, splits and swaps are accepted
    assert stats[1] > 0.05 * stats[0] and stats[2] > 0.02 * stats[0]
    assert (out[:, :, 4] == 0).all() and (out[:, :, 5] == 0).all()
    assert _worst_z(out, exact) < K_MCSE


@pytest.mark.parametrize("seed", [1, 2])
def test_split_merge_without_the_proposal_ratio_fails(seed):
    exact, _, _ = _exact()
    out, _ = _run(seed, exact_ratio=False)
    assert _worst_z(out, exact) > 2 * K_MCSE


# --------------------------------------------------------------------------------------------
# inside the whole sampler: K = 3 labels on the 1 x 3 enumeration fixtures of tests/test_hmm.py
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("z_sampler", ["collapsed", "marginal"])
def test_nonprivate_with_split_merge_matches_enumeration(z_sampler):
    """Eq. 68-69 Gibbs on exact counts with 6 split-merge moves per iteration, K = 3."""
    import warnings

    import privpost as pp
    from privpost.mechanisms import Laplace
    from privpost.models.hmm import HiddenMarkovNB
    from privpost.queries.cell_counts import CellCounts
    from test_hmm import _chain_targets, _enumerate

    sizes = np.array([[3, 2, 4]])
    recs = np.array([[0, 0, 0], [0, 0, 2], [0, 0, 2], [0, 1, 1], [0, 1, 1],
                     [0, 2, 0], [0, 2, 0], [0, 2, 2], [0, 2, 1]])
    q = CellCounts([3], sizes)
    rel = pp.release(recs, query=q, mechanism=Laplace(epsilon=1.0), seed=1)
    model = HiddenMarkovNB(3, [3], alpha=0.7, beta=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="nonprivate", records=recs, draws=5000, warmup=200,
                        chains=3, seed=5, z_sampler=z_sampler, split_merge=6)
    assert np.all(post.chain_stats.get("split_accept_rate", [1.0]) > 0.05)
    same01, same12, theta_z0 = _chain_targets(post, 3)
    counts = q.cell_matrix(q.statistic(recs))
    exact = _enumerate([[(counts[c], 0.0)] for c in range(3)], 3, 0.7, 1.0, sizes)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"])]
    zs += [_mcse_z(theta_z0[..., j], exact["theta_z0"][j]) for j in range(3)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    wrong = _enumerate([[(counts[c], 0.0)] for c in range(3)], 3, 0.05, 1.0, sizes)
    zw = [_mcse_z(same01, wrong["same01"]), _mcse_z(same12, wrong["same12"])]
    assert max(abs(v) for v in zw) > K_MCSE, zw


@pytest.mark.parametrize("split_merge,collapsed_shift", [(6, False), (0, True)])
def test_count_level_damcmc_with_split_merge_matches_enumeration(split_merge, collapsed_shift):
    """The count-level damcmc (default moves, the near-state proposal of the state shifts
    included) with 6 split-merge moves per iteration, or with the collapsed state shifts, K =
    3, Laplace noise: tests/test_hmm.py's enumeration of p(z, theta, n | obs); a wrong noise
    scale fails."""
    import warnings

    import privpost as pp
    from privpost.models.hmm import HiddenMarkovNB
    from test_hmm import _chain_targets, _enumerate, _noisy_options, _release, SIZES as S3

    obs = np.array([1.6, 0.2, -0.4, 1.3, 0.3, 2.2])
    rel = _release(obs)
    model = HiddenMarkovNB(3, [2], alpha=0.7, beta=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="damcmc", draws=5000, warmup=300, chains=3, seed=11,
                        keep_counts=True, split_merge=split_merge,
                        collapsed_shift=collapsed_shift)
    key = "split_accept_rate" if split_merge else "collapsed_shift_accept_rate"
    assert np.all(post.chain_stats[key] > 0.05)
    same01, same12, theta_z0 = _chain_targets(post, 3)
    counts = post.sample_stats["counts"][..., 1]
    exact = _enumerate(_noisy_options(obs, 1.0), 3, 0.7, 1.0, S3)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"]),
          _mcse_z(theta_z0[..., 1], exact["theta_z0"][1])]
    zs += [_mcse_z(counts[..., c], exact["counts"][c][1]) for c in range(3)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    wrong = _enumerate(_noisy_options(obs, 0.25), 3, 0.7, 1.0, S3)
    zw = [_mcse_z(counts[..., c], wrong["counts"][c][1]) for c in range(3)]
    zw.append(_mcse_z(theta_z0[..., 1], wrong["theta_z0"][1]))
    assert max(abs(v) for v in zw) > K_MCSE, zw


def test_split_merge_option_is_checked():
    import privpost as pp
    from privpost.errors import PrivpostError
    from privpost.models.hmm import HiddenMarkovNB
    from test_hmm import _release

    rel = _release(np.array([1.6, 0.2, -0.4, 1.3, 0.3, 2.2]))
    model = HiddenMarkovNB(3, [2])
    for bad in (-1, 1.5, True, "3", 10**6):
        with pytest.raises(PrivpostError, match="split_merge"):
            pp.infer(model, rel, method="damcmc", draws=10, warmup=5, split_merge=bad)
    with pytest.raises(PrivpostError, match="split_merge"):
        pp.infer(model, rel, method="ops", records=np.zeros((5, 1), dtype=int), split_merge=2)
    for bad in (-0.1, 1.5, True, "0.5", float("nan")):
        with pytest.raises(PrivpostError, match="near_shift"):
            pp.infer(model, rel, method="damcmc", draws=10, warmup=5, near_shift=bad)
    with pytest.raises(PrivpostError, match="near_shift"):
        pp.infer(model, rel, method="naive", draws=10, warmup=5, near_shift=0.5)
    for bad in (1, "yes"):
        with pytest.raises(PrivpostError, match="collapsed_shift"):
            pp.infer(model, rel, method="damcmc", draws=10, warmup=5, collapsed_shift=bad)
    with pytest.raises(PrivpostError, match="collapsed_shift"):
        pp.infer(model, rel, method="damcmc", draws=10, warmup=5, latent="records",
                 collapsed_shift=True)


# --------------------------------------------------------------------------------------------
# the near-state proposal of the state-shift moves (_hmm_core.state_shift_moves, near > 0)
# --------------------------------------------------------------------------------------------

NS_THETA = np.array([[0.6, 0.3, 0.1], [0.5, 0.3, 0.2], [0.1, 0.2, 0.7]])   # 0, 1 close; 2 far
NS_SIZES = np.array([3.0, 2.0, 4.0])
NS_OBS = np.array([[2.1, 0.4, 0.3], [0.2, 1.3, 0.9], [0.4, 0.8, 2.6]])
NS_SCALE = 0.9


def _ns_exact():
    """``P(z_c = k)`` (3, 3) and ``E[n_c]`` (3, 3) under ``p(z, n | theta, obs)`` (A integrated
    out, Laplace noise of scale NS_SCALE on every count), by enumeration."""
    from test_hmm import _log_polya_paths
    from test_hmm_shift import _compositions

    comps = [list(_compositions(int(N), 3)) for N in NS_SIZES]
    logt = np.log(NS_THETA)
    # per cell and state: log sum over its count vectors, and the count means
    cell_lw, cell_mean = np.empty((3, 3)), np.empty((3, 3, 3))
    for c in range(3):
        N = NS_SIZES[c]
        for k in range(3):
            lw = np.array([gammaln(N + 1) - gammaln(n + 1).sum() + n @ logt[k]
                           - np.abs(NS_OBS[c] - n).sum() / NS_SCALE for n in comps[c]])
            m = lw.max()
            p = np.exp(lw - m)
            cell_lw[c, k] = m + np.log(p.sum())
            cell_mean[c, k] = (p[:, None] * np.array(comps[c])).sum(0) / p.sum()
    pz, en, tot = np.zeros((3, 3)), np.zeros((3, 3)), 0.0
    for zz in itertools.product(range(3), repeat=3):
        w = np.exp(_log_polya_paths(np.array(zz), 3, ALPHA) + sum(cell_lw[c, zz[c]] for c in range(3)))
        tot += w
        for c in range(3):
            pz[c, zz[c]] += w
            en[c] += w * cell_mean[c, zz[c]]
    return pz / tot, en / tot


def _ns_chain(seed, qratio, chains=4, iters=6000):
    """count_sweep (counts given the states) + state_shift_moves with near = 0.9 (the only
    move of the states), theta fixed; returns z (chains, iters, 3) and counts (chains, iters,
    3, 3)."""
    off, levels = np.array([0], dtype=np.int64), np.array([3], dtype=np.int64)
    use = np.ones(3, dtype=np.int64)
    zs = np.empty((chains, iters, 3), dtype=np.int64)
    ns = np.empty((chains, iters, 3, 3))
    stats = np.zeros(8)
    for ch in range(chains):
        rng = np.random.default_rng([seed, ch])
        z = np.full((1, 3), ch % 3, dtype=np.int64)
        counts = np.stack([rng.multinomial(int(N), NS_THETA[ch % 3]) for N in NS_SIZES]).astype(float)
        ntr, nout = core.transition_counts(z, 3)
        for s in range(iters):
            core.count_sweep(z, np.log(NS_THETA), off, levels, counts, NS_OBS, 1.0 / NS_SCALE,
                             False, use, 1, rng)
            core.state_shift_moves(z, ntr, nout, NS_THETA, counts, NS_OBS, off, levels,
                                   NS_SIZES, 1.0 / NS_SCALE, False, use, ALPHA, stats, rng, 0.9,
                                   qratio)
            zs[ch, s] = z[0]
            ns[ch, s] = counts
    return zs, ns, stats


def _ns_worst(zs, ns, pz, en):
    out = [abs(_mcse_z((zs[..., c] == k).astype(float), pz[c, k]))
           for c in range(3) for k in range(3)]
    out += [abs(_mcse_z(ns[..., c, j], en[c, j])) for c in range(3) for j in range(3)]
    return max(out)


@pytest.mark.parametrize("seed", [1, 2])
def test_near_state_shift_keeps_the_law(seed):
    pz, en = _ns_exact()
    zs, ns, stats = _ns_chain(seed, 1.0)
    assert 0.05 < stats[3] / stats[2] < 0.95
    assert _ns_worst(zs, ns, pz, en) < K_MCSE


def test_near_state_shift_without_the_proposal_ratio_fails():
    pz, en = _ns_exact()
    zs, ns, _ = _ns_chain(1, 0.0)
    assert _ns_worst(zs, ns, pz, en) > 2 * K_MCSE


# --------------------------------------------------------------------------------------------
# the collapsed state shift (_hmm_split.collapsed_shift_moves): theta integrated out
# --------------------------------------------------------------------------------------------

CS_SIZES = np.array([[8, 3, 8]])
CS_OBS = np.array([6.3, 1.2, 0.4, 2.9, 7.4, 0.1])    # (cell, level): cells 0 and 2 differ


def _cs_options():
    """Per cell: every true count vector (N - m, m) with its log weight (multinomial
    coefficient + Laplace(1) noise), for tests/test_hmm.py's ``_enumerate``."""
    opts = []
    for c, N in enumerate(CS_SIZES.ravel()):
        o = CS_OBS[2 * c: 2 * c + 2]
        cell = []
        for m in range(N + 1):
            cnt = np.array([N - m, m], dtype=float)
            cell.append((cnt, gammaln(N + 1) - gammaln(cnt + 1).sum() - np.abs(o - cnt).sum()))
        opts.append(cell)
    return opts


def _cs_chain(seed, qratio, near=0.9, chains=4, iters=6000):
    """theta | z, n (Dirichlet) -> count_sweep (counts | z, theta) -> collapsed_shift_moves
    (the only move of the states) -> theta | z, n, on a 1 x 3 grid (sizes 8, 3, 8), K = 3,
    one feature of 2 levels, Laplace noise of scale 1. Returns same01, same12, theta_z0[level
    1] (3, chains, iters), counts[level 1] (chains, iters, 3) and the stats."""
    from privpost.inference._hmm_split import collapsed_shift_moves

    obs = CS_OBS.reshape(3, 2)
    sizes = CS_SIZES.ravel().astype(float)
    off, levels = np.array([0], dtype=np.int64), np.array([2], dtype=np.int64)
    use = np.ones(3, dtype=np.int64)
    out = np.empty((3, chains, iters))
    cnt = np.empty((chains, iters, 3))
    stats = np.zeros(2)
    for ch in range(chains):
        rng = np.random.default_rng([seed, ch])
        z = np.full((1, 3), ch % 3, dtype=np.int64)
        counts = np.stack([[N, 0.0] for N in sizes])
        ntr, nout = core.transition_counts(z, 3)
        theta = np.empty((3, 2))
        for s in range(iters):
            core.dirichlet_blocks(BETA + core.state_sums(z, counts, use, 3), off, levels, rng,
                                  theta)
            core.count_sweep(z, np.log(theta), off, levels, counts, obs, 1.0, False, use, 1,
                             rng)
            collapsed_shift_moves(z, ntr, nout, counts, obs, off, levels, sizes, 1.0, False,
                                  use, BETA, ALPHA, near, stats, rng, qratio)
            core.dirichlet_blocks(BETA + core.state_sums(z, counts, use, 3), off, levels, rng,
                                  theta)
            out[0, ch, s] = z[0, 0] == z[0, 1]
            out[1, ch, s] = z[0, 1] == z[0, 2]
            out[2, ch, s] = theta[z[0, 0], 1]
            cnt[ch, s] = counts[:, 1]
    return out, cnt, stats


def _cs_worst(out, cnt):
    from test_hmm import _enumerate

    ex = _enumerate(_cs_options(), 3, ALPHA, BETA, CS_SIZES)
    zs = [_mcse_z(out[0], ex["same01"]), _mcse_z(out[1], ex["same12"]),
          _mcse_z(out[2], ex["theta_z0"][1])]
    zs += [_mcse_z(cnt[..., c], ex["counts"][c][1]) for c in range(3)]
    return max(abs(v) for v in zs)


@pytest.mark.parametrize("seed,near", [(1, 0.9), (2, 0.0)])
def test_collapsed_shift_keeps_the_law(seed, near):
    out, cnt, stats = _cs_chain(seed, 1.0, near=near)
    assert 0.05 < stats[1] / stats[0] < 0.95
    assert _cs_worst(out, cnt) < K_MCSE


def test_collapsed_shift_without_the_proposal_ratio_fails():
    # near = 1: the proposal is the most asymmetric (|z| about 10 at 12000 iterations, 14 here)
    out, cnt, _ = _cs_chain(1, 0.0, near=1.0, iters=24000)
    assert _cs_worst(out, cnt) > 2 * K_MCSE
