"""The pair sweep of the count-table engine leaves the table's exact conditional law invariant
(privpost.inference._count_table.pair_sweep; issue 21).

At fixed cell probabilities the table's law given the release is ``pi(c) ∝ prod_g
Mult(c_g | N_g, p_g) eta(s | A c)``, enumerated here over every table of a tiny problem (two
groups of 4 and 2 cells plus a singleton, 6 + 3 + 2 units, a Laplace and a Gaussian coordinate
touching cells of both groups). Tables drawn i.i.d. from ``pi`` and moved by one sweep must still
be distributed as ``pi`` (a chi-square test on i.i.d. draws, p > P_CHECK = 2.8e-6); the sweep under test uses
both pair selections (uniform pairs, and pairs chosen by a unit uniform among the units, whose
state-dependent selection probability ``(c_i + c_j) / (U (|g| - 1))`` is unchanged by the move).
Wrong variant: the same exact pair conditional after a selection whose probability changes with
the move (the first cell by unit, its partner also by unit within the group) must fail
(p < 1e-10).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from _tolerance import P_CHECK
from privpost.inference import _count_table as ct
from privpost.inference._count_moves import ENUM_MAX
from privpost.mechanisms import Gaussian, Laplace

P_OK = P_CHECK          # family-wise (tests/_tolerance.py)
P_WRONG = 1e-10

GROUPS = [np.array([0, 1, 2, 3]), np.array([4, 5]), np.array([6])]
TOTALS = [6, 3, 2]
LOG_P = np.log(np.array([0.1, 0.2, 0.3, 0.4, 0.7, 0.3, 1.0]))
# coordinate 0 (Laplace): cells 0, 1 and 4; coordinate 1 (Gaussian): cells 1, 2, 5 (coefficient
# 2 on cell 2) and 6
A = np.array([[1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0],
              [0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 1.0]])
S = np.array([4.3, 9.6])
MECHS = [Laplace(scale=1.5), Gaussian(scale=1.2)]


def _tables():
    """Every table (T, 7) and its exact log pi (T,), from scipy and the mechanisms' logpdf."""
    per_group = []
    for cells, tot in zip(GROUPS, TOTALS):
        k = len(cells)
        rows = [c for c in itertools.product(range(tot + 1), repeat=k) if sum(c) == tot]
        per_group.append(np.array(rows, dtype=float))
    tabs = []
    for parts in itertools.product(*per_group):
        c = np.zeros(7)
        for cells, part in zip(GROUPS, parts):
            c[cells] = part
        tabs.append(c)
    tabs = np.array(tabs)
    lp = np.zeros(len(tabs))
    for cells, tot in zip(GROUPS, TOTALS):
        pg = np.exp(LOG_P[cells])
        pg = pg / pg.sum()
        lp += stats.multinomial.logpmf(tabs[:, cells], tot, pg)
    T = tabs @ A.T
    for m, mech in enumerate(MECHS):
        lp += mech.logpdf(np.array([S[m]]), T[:, m:m + 1])
    return tabs, lp


class _Law:
    """The engine's arrays for the problem (a CountTable without the model parts)."""

    def __init__(self):
        coords = ct.Coordinates(A, S, np.array([m.scale for m in MECHS]),
                                np.array([False, True]))
        self.law = ct.CountTable(
            names=["x"], shapes={"x": ()}, groups=GROUPS, totals=TOTALS, coords=coords,
            log_probs=lambda params: LOG_P, update=lambda params, c, rng: params,
            prior_sample=lambda rng: {"x": 0.0})
        L = self.law
        self.r = np.zeros(2)
        b = max(L.buf, 1)
        self.b_idx = np.zeros(b, dtype=np.int64)
        self.b_r, self.b_v, self.b_w = np.zeros(b), np.zeros(b), np.zeros(b)
        self.b_l2 = np.zeros(b, dtype=np.bool_)
        self.fen = np.zeros(L.eligible.shape[0] + 1)

    def sweep(self, c, n_pairs, unit_frac, rng):
        L, co = self.law, self.law.coords
        ct.pair_sweep(c, LOG_P, n_pairs, unit_frac, L.eligible, L.el_pos, self.fen,
                      L.cell_grp, L.grp_ptr, L.grp_cells, L.cell_ptr, L.cell_coord, L.cell_coef,
                      co.s, co.w, co.l2, self.r, self.b_idx, self.b_r, self.b_v, self.b_w,
                      self.b_l2, rng)

    def wrong_sweep(self, c, n_pairs, rng):
        """Both cells of the pair by unit within the group: P({i, j}) ∝ c_i c_j changes with
        the move, and no correction is made (the wrong variant)."""
        L, co = self.law, self.law.coords
        ct.residuals(c, L.cell_ptr, L.cell_coord, L.cell_coef, co.s, self.r)
        for _ in range(n_pairs):
            g = rng.integers(0, 2)                  # the two groups with >= 2 cells
            cells = GROUPS[g]
            w = c[cells] / c[cells].sum()
            i, j = rng.choice(cells, size=2, replace=False, p=None if w.max() == 1 else w) \
                if np.count_nonzero(w) >= 2 else rng.choice(cells, size=2, replace=False)
            ct._pair_update(int(i), int(j), c, LOG_P, L.cell_ptr, L.cell_coord, L.cell_coef,
                            co.w, co.l2, self.r, self.b_idx, self.b_r, self.b_v, self.b_w,
                            self.b_l2, rng)


def _chisq_p(idx, probs) -> float:
    n = idx.size
    obs = np.bincount(idx, minlength=probs.size).astype(float)
    exp_ = probs * n
    keep = exp_ >= 20
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(exp_[keep], exp_[~keep].sum())
    if e[-1] < 20:               # merge the remainder into the smallest kept cell
        k = np.argmin(e[:-1])
        o[k] += o[-1]
        e[k] += e[-1]
        o, e = o[:-1], e[:-1]
    chi = ((o - e) ** 2 / e).sum()
    return float(stats.chi2.sf(chi, o.size - 1))


def _run(step, n_draws=30_000, seed=5):
    tabs, lp = _tables()
    probs = np.exp(lp - special.logsumexp(lp))
    rng = np.random.default_rng(seed)
    start = rng.choice(len(tabs), size=n_draws, p=probs)
    index = {tuple(t): q for q, t in enumerate(tabs)}
    out = np.empty(n_draws, dtype=np.int64)
    for t in range(n_draws):
        c = tabs[start[t]].copy()
        step(c, rng)
        assert c.sum() == sum(TOTALS) and c.min() >= 0
        out[t] = index[tuple(c)]
    moved = float(np.mean(out != start))
    return _chisq_p(out, probs), moved


@pytest.mark.parametrize("unit_frac", [0.0, 0.5, 1.0])
def test_pair_sweep_keeps_the_exact_table_law(unit_frac):
    law = _Law()
    p, moved = _run(lambda c, rng: law.sweep(c, 3, unit_frac, rng))
    assert moved > 0.3          # the sweep does move the table
    assert p > P_OK


def test_pair_selection_that_changes_with_the_move_fails():
    law = _Law()
    p, moved = _run(lambda c, rng: law.wrong_sweep(c, 3, rng))
    assert moved > 0.3
    assert p < P_WRONG, p


def test_fenwick_tree_finds_the_unit_and_follows_moves():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 5, 37).astype(float)
    c[[3, 4, 20]] = 0.0
    eligible = np.arange(37, dtype=np.int64)
    fen = np.zeros(38)
    tot = ct._fen_build(c, eligible, fen)
    assert tot == c.sum()
    for _ in range(3):
        cum = np.concatenate([[0.0], np.cumsum(c)])
        for u in range(int(tot)):
            e = ct._fen_find(fen, float(u))
            assert cum[e] <= u < cum[e + 1]
        a, b = rng.choice(np.flatnonzero(c), 2, replace=False)
        k = float(min(c[a], 2.0))
        c[a] -= k
        c[b] += k
        ct._fen_add(fen, int(a), -k)
        ct._fen_add(fen, int(b), k)


def test_tiny_problem_uses_the_enumerated_move():
    assert max(TOTALS) + 1 <= ENUM_MAX      # every pair range here is enumerated
    assert math.isclose(float(np.exp(LOG_P[:4]).sum()), 1.0)
