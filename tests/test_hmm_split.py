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
