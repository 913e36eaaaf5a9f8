"""Pair moves among occupied cells (``privpost.inference._count_occupied``; issue 21 item 4).

Exact reference: the table's law given fixed cell probabilities, ``pi(c) ∝ Mult(c | N, p)
eta(s - A c)``, enumerated over every table of ``N`` units in ``J`` cells (a 3-node binary chain
released as its two pairwise tables with Laplace noise: ``J = 8``). The sweep's draws (kept after
each call of ``n_moves`` moves) must match the enumeration in the mean count of every cell and in
the law of the number of occupied cells, |z| < K_MCSE from the chain's ESS-based MCSE. Wrong
variant: the sweep without the ``M(c) / M(c')`` selection correction must fail (its stationary
law is ``pi(c) M(c)``: it over-weights tables with many occupied cells; |z| about 20 on
P(O = 3)). The damcmc end-to-end check against the enumerated private posterior of a tiny MRF
runs on this move too (``tests/test_damcmc_counts_tables.py::
test_mrf_counts_exact_by_enumeration``: ``mrf_table`` builds an ``OccupiedTable``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln

import privpost as pp
from privpost.errors import PrivpostError
from privpost.inference._count_occupied import (RESIDUAL_MAX_CELLS, OccupiedTable,
                                                default_shift, n_pairs_for,
                                                occupied_sweep, _n_pair_sets)
from privpost.queries.marginal_tables import MarginalTables
from privpost.mechanisms import Gaussian, Laplace
from privpost.models import CliqueMRF

from _mrf_exact import compositions
from test_damcmc import K_MCSE, _ess

CL = [[0, 1], [1, 2]]


def _law(N, mech, seed=3):
    model = CliqueMRF([2, 2, 2], CL, prior_sd=1.0)
    q = MarginalTables([2, 2, 2], CL)
    x = model.simulate(model.prior_sample(np.random.default_rng(seed)), N,
                       np.random.default_rng(seed + 1))
    rel = pp.release(x, query=q, mechanism=mech, seed=seed + 2)
    return model.count_latent(rel)


def _exact(law, lp):
    """Every table (M, J) and its probability under pi (M,)."""
    co = law.coords
    N = int(law.totals[0])
    H = compositions(N, law.J).astype(np.float64)
    R = co.s[None, :] - (co.A @ H.T).T
    le = -np.where(co.l2[None, :], co.w * R * R, co.w * np.abs(R)).sum(1)
    lw = (H * lp).sum(1) - gammaln(H + 1).sum(1) + le
    w = np.exp(lw - lw.max())
    return H, w / w.sum()


def _run_sweep(law, lp, n_calls, n_moves, correct, seed):
    co = law.coords
    rng = np.random.default_rng(seed)
    c = np.zeros(law.J)
    c[0] = law.totals[0]            # every unit in one cell; the first draws are dropped
    J, b = law.J, max(law.buf, 1)
    r = np.zeros(co.s.shape[0])
    occ, pos = np.zeros(J, np.int64), np.zeros(J, np.int64)
    bi = np.zeros(b, np.int64)
    br, bv, bw = np.zeros(b), np.zeros(b), np.zeros(b)
    bl = np.zeros(b, np.bool_)
    out = np.empty((n_calls, J))
    for t in range(n_calls):
        occupied_sweep(c, lp, n_moves, law.cell_ptr, law.cell_coord, law.cell_coef, co.s, co.w,
                       co.l2, r, occ, pos, bi, br, bv, bw, bl, correct, rng)
        out[t] = c
    return out


def _zs(draws, H, pr):
    """z of the mean count of every cell and of P(occupied cells = o) for each o."""
    zs = {}
    for j in range(H.shape[1]):
        x = draws[:, j]
        zs[f"c{j}"] = (x.mean() - pr @ H[:, j]) / (x.std() / math.sqrt(_ess(x[None])))
    occ_d, occ_e = (draws > 0).sum(1), (H > 0).sum(1)
    for o in np.unique(occ_e):
        ind = (occ_d == o).astype(float)
        p = float(pr[occ_e == o].sum())
        if 0.02 < p < 0.98:
            zs[f"O={o}"] = (ind.mean() - p) / math.sqrt(p * (1 - p) / _ess(ind[None]))
    return zs


@pytest.mark.parametrize("mech", [Laplace(epsilon=2.0), Gaussian(rho=1.0)])
def test_occupied_sweep_leaves_the_table_law_invariant(mech):
    law = _law(3, mech)
    lp = np.log(np.random.default_rng(0).dirichlet(np.ones(law.J)))
    H, pr = _exact(law, lp)
    draws = _run_sweep(law, lp, 40_000, 3, True, seed=11)
    zs = _zs(draws[1000:], H, pr)
    assert max(map(abs, zs.values())) < K_MCSE, zs


def test_occupied_sweep_without_the_selection_correction_fails():
    """WRONG: accept every exact conditional draw (no M(c)/M(c') correction)."""
    law = _law(3, Laplace(epsilon=2.0))
    lp = np.log(np.random.default_rng(0).dirichlet(np.ones(law.J)))
    H, pr = _exact(law, lp)
    draws = _run_sweep(law, lp, 40_000, 3, False, seed=11)
    zs = _zs(draws[1000:], H, pr)
    assert max(map(abs, zs.values())) > 2 * K_MCSE, zs


def test_pair_set_sizes():
    """M(c) = C(J, 2) - C(J - O, 2) against a count of the pairs."""
    import itertools
    for J in (2, 5, 9):
        for O in range(0, J + 1):
            occ = set(range(O))
            n = sum(1 for a, b in itertools.combinations(range(J), 2) if a in occ or b in occ)
            assert _n_pair_sets(J, O) == n


def test_mrf_table_uses_occupied_moves_and_the_shift_move():
    law = _law(3, Laplace(epsilon=2.0))
    assert isinstance(law, OccupiedTable)
    # the compiled quantile shift: QUANTILE_WORK / (N + J) moves, between 2 and 40
    assert law.n_pairs == n_pairs_for(8, 3) == 3 and law.n_shift == 40
    assert n_pairs_for(59049, 10**6) == 59049 and n_pairs_for(59049, 1000) == 1000
    post = pp.infer(CliqueMRF([2, 2, 2], CL, prior_sd=1.0), _release(), method="damcmc",
                    latent="counts", draws=50, warmup=50, chains=2, seed=0, progress=False)
    assert any("pair moves among occupied cells" in n for n in post.notes), post.notes
    # N = 6 records: the quantile shift (tests/test_count_mrf_loopy.py), compiled for the MRF up
    # to QUANTILE_UNITS_PER_CELL * J = 128 units; above, the residual shift
    assert any("quantile-shift" in n for n in post.notes), post.notes
    assert law.shift == "quantile" and _law(128, Laplace(epsilon=2.0)).shift == "quantile"
    assert _law(129, Laplace(epsilon=2.0)).shift == "residual"
    assert default_shift(8, 9, False) == "residual" and default_shift(8, 8, False) == "quantile"
    assert default_shift(10**6, 10**6, True) == "quantile"
    # above the quantile shift's cap, the residual shift only on tables of at most
    # RESIDUAL_MAX_CELLS cells (on larger ones it cannot move: EXPERIMENTS §9.10), else none
    assert default_shift(10**3, 10**4, True) == "quantile"
    assert default_shift(10**3, 10**4 + 1, True) is None
    assert default_shift(3**10, 3**10, True) == "quantile"
    assert default_shift(3**10, 10**5, True) is None and default_shift(3**10, 10**6, True) is None
    assert default_shift(RESIDUAL_MAX_CELLS, 16 * RESIDUAL_MAX_CELLS + 1, True) == "residual"
    assert default_shift(RESIDUAL_MAX_CELLS + 1, 10**4 + 1, True) is None
    assert default_shift(RESIDUAL_MAX_CELLS + 1, RESIDUAL_MAX_CELLS + 1, False) == "quantile"
    assert default_shift(RESIDUAL_MAX_CELLS + 1, RESIDUAL_MAX_CELLS + 2, False) is None

def _release():
    model = CliqueMRF([2, 2, 2], CL, prior_sd=1.0)
    x = model.simulate(model.prior_sample(np.random.default_rng(1)), 6,
                       np.random.default_rng(2))
    return pp.release(x, query=MarginalTables([2, 2, 2], CL), mechanism=Laplace(epsilon=2.0),
                      seed=3)


def test_occupied_table_refuses_bad_anchor_and_total():
    law = _law(3, Laplace(epsilon=2.0))
    kw = dict(names=law.names, shapes=law.shapes, coords=law.coords, log_probs=law.log_probs,
              update=law.update, prior_sample=law.prior_sample, log_prior=law.log_prior,
              free=law.free)
    with pytest.raises(PrivpostError, match="anchor"):
        OccupiedTable(N=3, anchor=8, **kw)
    with pytest.raises(PrivpostError, match="total N"):
        OccupiedTable(N=-1, anchor=0, **kw)
    ok = OccupiedTable(N=3, anchor=5, **kw)
    assert ok.last[0] == 5 and ok.n_pairs == 3


def _is_mu(model, counts, N, draws=200_000, seed=0):
    """Self-normalised IS (prior proposal) of E[mu(theta) | counts] (d,) and its SE (d,):
    ``p(theta | counts) ∝ N(theta; 0, sigma^2 I) exp(theta' counts - N A(theta))``."""
    from _mrf_exact import design
    from scipy.special import logsumexp

    _, D = design(model)
    rng = np.random.default_rng(seed)
    th = model.prior_sd * rng.standard_normal((draws, model.dim))
    lp = th @ D.T
    a = logsumexp(lp, axis=1)
    mu = np.exp(lp - a[:, None]) @ D
    lw = th @ counts - N * a
    w = np.exp(lw - lw.max())
    w /= w.sum()
    m = w @ mu
    se = np.sqrt((w[:, None] ** 2 * (mu - m) ** 2).sum(0))
    return m, se


def test_mrf_table_theta_update_with_the_table_mass_is_exact():
    """The MRF table's theta update (HMC with the dense mass computed from the table) leaves
    p(theta | c) invariant: E[mu | c] against importance sampling with the exact likelihood;
    WRONG: the same draws against the reference of another table (one unit moved) fail."""
    law = _law(6, Laplace(epsilon=2.0))
    model = CliqueMRF([2, 2, 2], CL, prior_sd=1.0)
    c = np.array([2.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 2.0])
    from privpost.models._count_tables import joint_domain

    x = np.repeat(joint_domain([2, 2, 2]), c.astype(int), axis=0)
    counts, N = model.counts(x), float(c.sum())
    ref, ref_se = _is_mu(model, counts, N)
    c_w = c.copy()
    c_w[0] -= 1.0
    c_w[1] += 1.0
    x_w = np.repeat(joint_domain([2, 2, 2]), c_w.astype(int), axis=0)
    wrong, wrong_se = _is_mu(model, model.counts(x_w), N)
    rng = np.random.default_rng(4)
    chains = []
    for _ in range(2):
        params = model.prior_sample(rng)
        out = []
        for t in range(1500):
            params = law.update(params, c, rng)
            out.append(model.marginals(model.flatten(params))[1])
        chains.append(np.array(out)[200:])
    d = np.stack(chains)                       # (2, S, d)
    zs, zw = [], []
    for k in range(0, model.dim, 2):           # one cell of each pair (the other is 1 - it)
        se = d[..., k].std() / math.sqrt(_ess(d[..., k]))
        zs.append((d[..., k].mean() - ref[k]) / math.hypot(se, ref_se[k]))
        zw.append((d[..., k].mean() - wrong[k]) / math.hypot(se, wrong_se[k]))
    assert max(map(abs, zs)) < K_MCSE, zs
    assert max(map(abs, zw)) > 2 * K_MCSE, zw


def test_large_mrf_table_above_the_quantile_cap_runs_no_idle_residual_shift():
    """J = 3^6 = 729 > RESIDUAL_MAX_CELLS cells: the quantile shift up to its cap of
    min(16 J, 10^4) = 10^4 units; above, no non-centred move (the residual shift cannot move on
    such tables, EXPERIMENTS §9.10), and the notes say so; still available on request."""
    levels, cl = [3] * 6, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]
    model = CliqueMRF(levels, cl, prior_sd=1.0)
    rng = np.random.default_rng(0)
    th = model.prior_sample(rng)
    J = 3 ** 6
    for N, shift in ((10**4, "quantile"), (10**4 + 1, None)):
        x = model.simulate(th, N, rng)
        rel = pp.release(x, query=MarginalTables(levels, cl), mechanism=Laplace(epsilon=1.0),
                         seed=1)
        law = model.count_latent(rel)
        assert law.J == J and law.shift == shift
        assert (law.n_shift > 0) == (shift is not None)
        note = law.extra_notes([{"pair_accept": 1.0, "shift_accept": 0.2, "hmc_eps": 0.1,
                                 "hmc_accept": 0.8}])[0]
        if shift is None:
            assert "no non-centred move" in note and "§9.10" in note, note
            law.set_shift("residual")          # still available on request (exact)
            assert law.shift == "residual" and law.n_shift == 2
        else:
            assert "quantile-shift" in note, note
