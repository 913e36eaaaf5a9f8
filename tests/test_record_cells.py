"""The compiled record sweep on cells (one-hot count queries; inference/_kernels.sweep_cells and
the driver's ``use_cells`` mode, issue 21 item 4: seed 000 Table 1's record path).

* the cell sweep against the dense sweeps (sweep_l1 / sweep_l2) on random naive-Bayes states:
  the same accept decisions, running sums and counters, for one and two sweeps; a wrong
  declaration (two cell positions sharing one block of coordinates) makes them disagree;
* the driver with cells against the driver on dense contributions (cells switched off): the same
  chain, bit for bit, with the non-centred move (whose proposals' sums are then counted from
  cells) on a naive-Bayes and a histogram release;
* cells that disagree with the contributions are refused by the validation (dense sweep used).

Exactness of the record path with cells against enumeration is checked by the existing tests,
which now run on it: tests/test_compiled_more_moves.py (NaiveBayesCounts, compiled move,
missing-Jacobian variant fails) and tests/test_damcmc.py (discrete-Gaussian Histogram, l2).
"""

from __future__ import annotations

import numpy as np
import pytest

import privpost as pp
from privpost.inference import _damcmc_fast as fastmod
from privpost.inference._kernels import sweep_cells, sweep_l1, sweep_l2, weights_for
from privpost.mechanisms import DiscreteGaussian, Laplace
from privpost.models import DirichletCategorical, NaiveBayesLogLinear
from privpost.queries import Histogram, NaiveBayesCounts

I, LEVELS = 3, [3, 2, 4]


def _state(rng, n, k, use_l2):
    """Random NB records (current and k sweeps of proposals), their cells and contributions,
    a release-like s_obs near the current sums, uniforms."""
    q = NaiveBayesCounts(n_classes=I, n_levels=LEVELS)
    cells, K = fastmod.builtin_cells(q)

    def recs(m):
        return np.column_stack([rng.integers(0, I, m)] + [rng.integers(0, J, m) for J in LEVELS]
                               ).astype(np.float64)

    cur, prop = recs(n), recs(k * n)
    c_cur, c_prop = np.zeros((n, K), np.int64), np.zeros((k * n, K), np.int64)
    cells(cur, c_cur)
    cells(prop, c_prop)
    t_cur, t_prop = q.t(cur.astype(np.int64)), q.t(prop.astype(np.int64))
    T = t_cur.sum(axis=0)
    s_obs = T + rng.laplace(0.0, 2.0, q.dim)
    w = weights_for("l2" if use_l2 else "l1", rng.uniform(0.5, 3.0, q.dim), q.dim)
    log_u = np.log(rng.random(k * n))
    return c_cur, c_prop, np.ascontiguousarray(t_cur), np.ascontiguousarray(t_prop), T, s_obs, \
        w, log_u


def _dense(use_l2, T, s_obs, t_cur, t_prop, log_u, w, n, k):
    acc, rc, sc = np.zeros(k * n, np.bool_), np.zeros(n, np.int64), np.zeros(k, np.int64)
    f = sweep_l2 if use_l2 else sweep_l1
    nacc = f(T, s_obs, t_cur, t_prop, np.empty(0), log_u, w, acc, rc, sc)
    return nacc, acc, rc, sc


def _cells(use_l2, T, s_obs, c_cur, c_prop, log_u, w, n, k):
    acc, rc, sc = np.zeros(k * n, np.bool_), np.zeros(n, np.int64), np.zeros(k, np.int64)
    nacc = sweep_cells(use_l2, T, s_obs, c_cur, c_prop, log_u, w, acc, rc, sc)
    return nacc, acc, rc, sc


@pytest.mark.parametrize("use_l2", [False, True])
@pytest.mark.parametrize("k", [1, 2])
def test_cell_sweep_equals_the_dense_sweep(use_l2, k):
    rng = np.random.default_rng(11 + k + 2 * use_l2)
    n = 60
    for _ in range(20):
        c_cur, c_prop, t_cur, t_prop, T, s_obs, w, log_u = _state(rng, n, k, use_l2)
        T1, T2 = T.copy(), T.copy()
        d = _dense(use_l2, T1, s_obs, t_cur, t_prop, log_u, w, n, k)
        c = _cells(use_l2, T2, s_obs, c_cur, c_prop, log_u, w, n, k)
        assert 0 < d[0] < k * n             # both outcomes occur
        assert d[0] == c[0]
        for a, b in zip(d[1:], c[1:]):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(T1, T2)                 # exact integer steps
        # the cells the sweep kept are the dense sweep's final contributions
        q = NaiveBayesCounts(n_classes=I, n_levels=LEVELS)
        onehot = np.zeros((n, q.dim))
        np.put_along_axis(onehot, c_cur, 1.0, axis=1)
        np.testing.assert_array_equal(onehot, t_cur)


def test_cell_sweep_with_overlapping_positions_is_wrong():
    """Wrong variant: positions that share one block (here two copies of the class-by-feature-1
    cell, K = 2 over one table) break the "other coordinates do not change" argument: the cell
    sweep then disagrees with the dense sweep of the same contributions."""
    rng = np.random.default_rng(5)
    n, d = 80, 6
    cur, prop = rng.integers(0, d, n), rng.integers(0, d, n)
    c_cur = np.ascontiguousarray(np.column_stack([cur, cur]).astype(np.int64))
    c_prop = np.ascontiguousarray(np.column_stack([prop, prop]).astype(np.int64))
    t_cur, t_prop = np.zeros((n, d)), np.zeros((n, d))
    t_cur[np.arange(n), cur] = 2.0                  # the dense contributions of those cells
    t_prop[np.arange(n), prop] = 2.0
    T = t_cur.sum(axis=0)
    s_obs = T + rng.laplace(0.0, 1.0, d)
    w = np.full(d, 0.7)
    log_u = np.log(rng.random(n))
    dense = _dense(False, T.copy(), s_obs, t_cur, t_prop, log_u, w, n, 1)
    cells = _cells(False, T.copy(), s_obs, c_cur, c_prop, log_u, w, n, 1)
    assert not np.array_equal(dense[1], cells[1])


def _nb():
    model = NaiveBayesLogLinear(n_levels=LEVELS, n_classes=I, class_alpha=[1.0, 2.0, 1.5])
    q = NaiveBayesCounts(n_classes=I, n_levels=LEVELS)
    x = model.simulate(model.prior_sample(np.random.default_rng(3)), 50,
                       np.random.default_rng(4))
    return model, pp.release(x, query=q, mechanism=Laplace(epsilon=1.0), seed=5)


def _hist():
    model = DirichletCategorical(alpha=[1.0, 2.0, 1.0, 0.5])
    q = Histogram(categories=4)
    x = np.random.default_rng(6).integers(0, 4, 40)
    return model, pp.release(x, query=q, mechanism=DiscreteGaussian(rho=0.5), seed=7)


@pytest.mark.filterwarnings("ignore::privpost.errors.ConvergenceWarning")
@pytest.mark.parametrize("make", [_nb, _hist])
def test_driver_with_cells_gives_the_dense_drivers_chain(make, monkeypatch):
    from privpost.inference import damcmc as D

    model, rel = make()
    prob = D._Problem(model, rel, proposal=None, sweeps_per_iteration=2, interweave=3)
    assert fastmod.resolve_fast_path(prob, True).cells is not None    # the path under test
    kw = dict(latent="records", draws=400, warmup=200, chains=2, seed=8, progress=False, cores=1,
              fast_path=True,
              interweave=3, sweeps_per_iteration=2)
    a = pp.infer(model, rel, method="damcmc", **kw)
    monkeypatch.setattr(fastmod, "builtin_cells", lambda query: None)
    b = pp.infer(model, rel, method="damcmc", **kw)
    for name in a.draws:
        np.testing.assert_array_equal(a.draws[name], b.draws[name])
    for key in ("accept_rate", "log_eta"):
        np.testing.assert_array_equal(a.sample_stats[key], b.sample_stats[key])
    np.testing.assert_array_equal(a.chain_stats["interweave_accept_rate"],
                                  b.chain_stats["interweave_accept_rate"])


def test_cells_that_disagree_with_the_contributions_are_not_used(monkeypatch):
    model, rel = _nb()
    real = fastmod.builtin_cells(rel.query)

    def shifted(query):
        cells, K = real

        @__import__("numba").njit
        def wrong(rec, out):
            cells(rec, out)
            out[0, 0] = out[0, 0] + 1         # one wrong cell
        return wrong, K

    monkeypatch.setattr(fastmod, "builtin_cells", shifted)
    from privpost.inference import damcmc as D

    prob = D._Problem(model, rel, proposal=None, sweeps_per_iteration=1, interweave=0)
    fast = fastmod.resolve_fast_path(prob, True)
    assert fast.cells is None
    monkeypatch.setattr(fastmod, "builtin_cells", lambda query: real)
    assert fastmod.resolve_fast_path(prob, True).cells is not None
