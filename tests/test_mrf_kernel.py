"""The compiled theta kernel of the count-level CliqueMRF (``privpost.models._mrf_kernel``) and
its compiled quantile-shift move (``privpost.inference._quantile_shift``); issue 21.

* exact inference: the compiled enumeration and the compiled (flattened) junction tree give the
  model's ``log Z`` and clique marginals (Python junction tree) to rounding, on chains, loopy
  graphs, a triangle clique and a disconnected structure;
* the dense table mass: ``L L' = B'HB + I / sigma^2`` against NumPy;
* invariance of ``p(theta | c)`` on the junction-tree path with 2 HMC steps per update:
  ``E[mu | c]`` against importance sampling with the exact likelihood (|z| < K_MCSE from the
  ESS-based MCSE); WRONG: the same draws against the reference of another table (one unit
  moved) must fail;
* the compiled quantile-shift move equals the Python move (``OccupiedTableChain.
  _quantile_shift``) draw for draw on the same state and generator -- the Python move is
  checked against the enumerated posterior, with its wrong variant, in
  tests/test_count_mrf_loopy.py (whose chain now runs the compiled move).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privpost as pp
from privpost.mechanisms import Laplace
from privpost.models import CliqueMRF
from privpost.models._count_tables import joint_domain
from privpost.models._mrf_kernel import MRFThetaKernel, _table_mass
from privpost.queries.marginal_tables import MarginalTables

from test_count_occupied import _is_mu
from test_damcmc import K_MCSE, _ess

STRUCTURES = [
    ([2, 2, 2, 2], [[0, 1], [1, 2], [2, 3], [3, 0]]),          # loop
    ([3, 2, 4], [[0, 1], [2, 1], [0]]),                          # chain + a singleton
    ([2, 3, 2, 2, 3], [[0, 1, 2], [2, 3], [3, 4], [4, 0]]),     # triangle clique in a loop
    ([2, 2, 3, 2], [[0, 1], [2, 3]]),                            # two components
]


def _idx(model):
    dom = joint_domain(model.levels)
    return np.stack([o + dom[:, list(c)] @ st for c, st, o in
                     zip(model.cliques, model._strides, model.offsets)], axis=1)


@pytest.mark.parametrize("levels,cliques", STRUCTURES)
def test_compiled_inference_matches_the_junction_tree(levels, cliques):
    model = CliqueMRF(levels, cliques)
    rng = np.random.default_rng(0)
    for use_jt in (False, True):
        k = MRFThetaKernel(model, _idx(model), use_jt=use_jt)
        for _ in range(5):
            th = 2.0 * rng.standard_normal(model.dim)
            a, mu = k.marginals(th)
            a0, mus = model.jt.clique_marginals(model.tables(th))
            assert abs(a - a0) < 1e-10
            np.testing.assert_allclose(mu, np.concatenate([m.ravel() for m in mus]),
                                       atol=1e-12)


def test_table_mass_is_the_empirical_information():
    model = CliqueMRF(*STRUCTURES[2])
    idx = _idx(model)
    B = np.ascontiguousarray(model.identified_basis()[0])
    c = np.random.default_rng(1).poisson(3.0, idx.shape[0]).astype(float)
    counts, L = np.zeros(model.dim), np.zeros((B.shape[1],) * 2)
    N = _table_mass(c, idx, B, 1.0 / model.prior_sd ** 2, counts, L)
    A = np.zeros((model.dim, idx.shape[0]))
    for x in range(idx.shape[0]):
        A[idx[x], x] = 1.0
    H = A @ np.diag(c) @ A.T - np.outer(A @ c, A @ c) / c.sum()
    M = B.T @ H @ B + np.eye(B.shape[1]) / model.prior_sd ** 2
    assert N == c.sum()
    np.testing.assert_allclose(counts, A @ c)
    np.testing.assert_allclose(L @ L.T, M, atol=1e-9)
    assert np.all(np.triu(L, 1) == 0.0)


@pytest.mark.statistical
def test_junction_tree_kernel_keeps_theta_given_the_table():
    """2 HMC steps per update on the junction-tree path leave p(theta | c) invariant."""
    model = CliqueMRF([2, 2, 2], [[0, 1], [1, 2]], prior_sd=1.0)
    c = np.array([2.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 2.0])
    x = np.repeat(joint_domain([2, 2, 2]), c.astype(int), axis=0)
    ref, ref_se = _is_mu(model, model.counts(x), float(c.sum()))
    c_w = c.copy()
    c_w[0] -= 1.0
    c_w[1] += 1.0
    x_w = np.repeat(joint_domain([2, 2, 2]), c_w.astype(int), axis=0)
    wrong, wrong_se = _is_mu(model, model.counts(x_w), float(c.sum()))
    k = MRFThetaKernel(model, _idx(model), use_jt=True, n_steps=2)
    rng = np.random.default_rng(11)
    chains = []
    for _ in range(2):
        th = model.prior_sd * rng.standard_normal(model.dim)
        out = []
        for t in range(1500):
            th, acc = k.update(th, c, rng)
            assert 0.0 <= acc <= 1.0
            out.append(k.marginals(th)[1])
        chains.append(np.array(out)[200:])
    d = np.stack(chains)
    zs, zw = [], []
    for j in range(0, model.dim, 2):
        se = d[..., j].std() / math.sqrt(_ess(d[..., j]))
        zs.append((d[..., j].mean() - ref[j]) / math.hypot(se, ref_se[j]))
        zw.append((d[..., j].mean() - wrong[j]) / math.hypot(se, wrong_se[j]))
    assert max(map(abs, zs)) < K_MCSE, zs
    assert max(map(abs, zw)) > 2 * K_MCSE, zw


def test_compiled_quantile_shift_is_the_python_move():
    """Same state, same generator state: the compiled move and the Python move give the same
    theta, table and log probabilities (frozen proposal: no adaptation)."""
    model = CliqueMRF([2, 2, 2, 2], STRUCTURES[0][1], prior_sd=1.0)
    q = MarginalTables([2, 2, 2, 2], STRUCTURES[0][1])
    x = model.simulate(model.prior_sample(np.random.default_rng(2)), 12,
                       np.random.default_rng(3))
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=0.5), seed=4)
    law = model.count_latent(rel)
    assert law.shift == "quantile" and law.loglinear is not None and law.n_shift > 2
    law.n_shift = 6
    ch = law.chains([np.random.default_rng(5)], "data")[0]
    ch.run(50, keep=False)                       # a typical state; adapted proposal
    moved = 0
    for rep in range(20):
        # give both moves the same proposal covariance and scale
        ch.iw.log_s = float(ch.ll["iw_f"][0])
        ch.iw.chol = ch.ll["chol"].copy()
        state = (dict(ch.params), ch.c.copy(), ch.lp.copy())
        seed = 100 + rep
        ch.rng = np.random.default_rng(seed)
        ch._quantile_shift_compiled(adapting=False)
        got = (model.flatten(ch.params), ch.c.copy(), ch.lp.copy())
        ch.params, ch.c, ch.lp = dict(state[0]), state[1].copy(), state[2].copy()
        ch.rng = np.random.default_rng(seed)
        ch._quantile_shift(adapting=False)
        np.testing.assert_allclose(got[0], model.flatten(ch.params), atol=1e-10)
        np.testing.assert_array_equal(got[1], ch.c)
        np.testing.assert_allclose(got[2], ch.lp, atol=1e-10)
        moved += int(np.any(got[0] != model.flatten(state[0])))
    assert moved >= 3           # the comparison covered accepted moves, not only rejections
