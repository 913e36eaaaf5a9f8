"""The count-table latent of one (or several) Multinomial groups released as ``A c + noise``
(issue 21; DESIGN §10; COUNTS.md piece 2).

Target: ``p(theta, c | s) ∝ p(theta) prod_g Multinomial(c_g | N_g, p_g(theta)) eta(s | A c)``
where ``c`` (``J`` integer cells) is the true count table, partitioned into groups ``g`` of fixed,
public totals ``N_g`` (one group for a histogram, a 0/1 sum or a joint table), ``A`` (``d x J``,
sparse) maps the table to the ``d`` released coordinates (several releases of the same table: their
rows stacked) and ``eta`` is the mechanisms' density, coordinate ``m`` with kernel family ``l1``
(``-w_m |z|``) or ``l2`` (``-w_m z^2``), ``w`` from :func:`privpost.inference._kernels.weights_for`.
The theta-marginal of the chain is the exact private posterior.

One iteration of a chain (each step leaves the target invariant, so their composition does):

1. ``n_pairs`` **pair moves** (compiled, :func:`pair_sweep`; default :func:`default_pairs`): a
   pair of cells of one group -- a uniform pair, or (a fraction ``unit_frac`` of the moves) the
   cell of a unit drawn uniformly among the table's units and a uniform partner, a selection
   whose probability no move within the pair changes -- then ``k`` units moved between them
   drawn exactly from their full conditional
   (:func:`privpost.inference._count_moves.pair_move`; random-scan Gibbs). On the Dirichlet
   path (every concentration ``>= 1``) the moves are **collapsed** by default: theta
   integrated out, the pair's conditional under the Dirichlet-multinomial law of the table
   (:func:`privpost.inference._count_moves.pair_move_c`), which leaves ``p(c | s)`` invariant;
   the exact draw ``theta ~ p(theta | c)`` of step 2 follows at once, so the two steps together
   leave ``p(theta, c | s)`` invariant (a partially collapsed Gibbs block) and the table's moves
   no longer wait for theta when cells hold a few units against the noise;
2. the **theta update** given the table (the model's conjugate draw, or any kernel leaving
   ``p(theta | c) ∝ p(theta) prod_g Mult(c_g | p_g(theta))`` invariant);
3. ``n_shift`` **residual-shift** moves (non-centred; when the model has free coordinates):
   ``v' = v + s L z`` (``z`` standard normal; ``v`` the free coordinates of theta; ``s, L``
   adapted during the warm-up only, :class:`privpost.inference.damcmc._IWState`) and the table
   moved with theta: the residuals ``rho_j = c_j - round(N_g p_j(theta))`` are held fixed on every
   cell but the last of each group, which takes ``N_g`` minus the rest; a proposal with a negative
   cell is rejected. For fixed ``(theta, theta')`` the map ``c -> c'`` is a translation of the
   free cells by an integer vector (unit Jacobian on the integers) whose inverse is the map for
   ``(theta', theta)``, so the move is a symmetric proposal on ``(v, c)`` and its MH ratio is
   ``p(theta') |d theta'/d v'| p(c' | theta') eta(s | A c')`` over the same at ``(theta, c)``. It
   keeps mixing when the noise is large against ``sqrt(N)``, where the table is almost
   determined by theta and the centred steps 1-2 move theta by ``O(1/sqrt(N))`` only.

The cost of an iteration depends on ``J``, ``d`` and the number of non-zeros of ``A`` -- not on
``N``. Compiled functions are cached on disk (``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.errors import PrivpostError
from privpost.inference._count_latent import CountLatent
from privpost.inference._count_moves import _lgamma_diff, pair_move_c
from privpost.inference._damcmc_fast import _iw_adapt, _iw_propose
from privpost.inference._kernels import log_eta_change, weights_for
from privpost.models._numeric import log_space_dirichlet

__all__ = ["CountTable", "Coordinates", "pair_sweep", "pair_sweep_c",
           "residuals", "table_change", "log_eta", "shift_log_ratio",
           "data_table", "ipf_table", "project_simplex_int"]


#: The residual-shift move adapts a dense ``dim x dim`` proposal covariance; tables with more free
#: cells (``J`` minus the number of groups) run without it (stated in the notes).
MAX_SHIFT_DIM = 400

def default_pairs(J: int, units: float) -> int:
    """Pair moves per iteration by default: ``J * f`` (at least 2) with ``f = clip(sqrt(8 J /
    units), 0.1, 1)``. While a cell holds a few units (``units <~ 8 J``) the table carries much
    of the information about theta and needs ``~J`` moves per iteration to follow it; when the
    cells are large the release pins the table's margins (noise << sqrt of the counts), theta
    hardly depends on the rest of the table, and a tenth of that keeps the same ESS per
    iteration at a fraction of the cost. Measured (``benchmarks/bench_count_pairs.py``: worst
    ESS of 4 x 1,000 draws, CPU seconds; half the pairs chosen by unit): seed 000's naive-Bayes
    table (J = 1,215) at n = 1e8: J pairs 3,367 in 13.0 s, J/4 3,385 in 3.8 s, J/10 3,408 in
    2.0 s; at n = 1e6: J 2,876 in 12.4 s, J/10 2,393 in 2.1 s; at n = 1e4 (8 units per cell):
    J 394 in 9.1 s, J/4 97 in 3.0 s, J/10 35 in 1.7 s; the K = 10 histogram at n = 1e8:
    10 pairs 3,579 in 0.11 s, 2 pairs 3,521 in 0.05 s (at n = 100, 9 pairs 1,494 in 0.10 s,
    2 pairs 1,057 in 0.05 s: the rule keeps the safer 9)."""
    f = min(1.0, max(0.1, math.sqrt(8.0 * J / max(units, 1.0))))
    return max(2, int(math.ceil(J * f)))


#: Default fraction of the pair moves whose pair is chosen by unit (:func:`pair_sweep`). Measured
#: (``benchmarks/bench_count_pairs.py``, worst ESS of 4 x 1,000 draws at the default number of
#: pairs; shares 0 / 0.5 / 1): seed 000's naive-Bayes table at n = 100 86 / 98 / 323, at
#: n = 1e4 - / 394 / 387, at n = 1e8 3,279 / 3,408 / 3,357; the 4-node MRF at n = 100
#: - / 596 / 700; the K = 10 histogram at n = 100 - / 1,494 / 1,430 (same CPU time). Every cell
#: still takes part as the uniform partner, so nothing is lost where the units are spread.
DEFAULT_UNIT_FRAC = 1.0

#: Collapsed pair moves by default on the Dirichlet path (every concentration >= 1). With theta
#: integrated out the table's chain no longer waits for theta: at a few units per cell against the
#: noise (missing-information fraction ~ 1/2) the centred moves give ESS/draw ~ 1/3 (measured:
#: the K = 10 histogram at n = 100, 0.36; collapsed 0.60, 0.64 along a matching; in the
#: noise-dominated regime 0.004 -> 0.14: benchmarks/README.md, "collapsed pair moves").
DEFAULT_COLLAPSED = True

# ============================================================================================
# compiled pieces
# ============================================================================================

@njit(cache=True, nogil=True)
def residuals(c, cell_ptr, cell_coord, cell_coef, s, r):
    """``r = s - A c`` (``r``: (d,) output) with ``A`` in per-cell sparse form."""
    for m in range(s.shape[0]):
        r[m] = s[m]
    for j in range(c.shape[0]):
        cj = c[j]
        if cj != 0.0:
            for q in range(cell_ptr[j], cell_ptr[j + 1]):
                r[cell_coord[q]] -= cell_coef[q] * cj


@njit(cache=True, nogil=True)
def table_change(c, c_new, cell_ptr, cell_coord, cell_coef, dr):
    """``dr = A (c_new - c)`` (``dr``: (d,) output) with ``A`` in per-cell sparse form: the
    change of the released statistic, exact for integer tables and integer coefficients (the
    input of :func:`privpost.inference._kernels.log_eta_change`)."""
    for m in range(dr.shape[0]):
        dr[m] = 0.0
    for j in range(c.shape[0]):
        dj = c_new[j] - c[j]
        if dj != 0.0:
            for q in range(cell_ptr[j], cell_ptr[j + 1]):
                dr[cell_coord[q]] += cell_coef[q] * dj


@njit(cache=True, nogil=True)
def log_eta(r, w, l2):
    """``sum_m log eta_m(r_m)`` without constants (``-w|r|`` or ``-w r^2``)."""
    out = 0.0
    for m in range(r.shape[0]):
        if l2[m]:
            out -= w[m] * r[m] * r[m]
        else:
            out -= w[m] * abs(r[m])
    return out


@njit(cache=True, nogil=True)
def _fen_build(c, eligible, fen):
    """Fenwick (binary indexed) tree ``fen`` (E+1,) over the counts of the eligible cells
    (``c[eligible[e]]`` at position ``e + 1``); returns their total."""
    n_el = eligible.shape[0]
    for e in range(n_el + 1):
        fen[e] = 0.0
    for e in range(n_el):
        x = e + 1
        val = c[eligible[e]]
        while x <= n_el:
            fen[x] += val
            x += x & (-x)
    tot = 0.0
    for e in range(n_el):
        tot += c[eligible[e]]
    return tot


@njit(cache=True, nogil=True)
def _fen_add(fen, e, delta):
    """Add ``delta`` at eligible position ``e`` (0-based)."""
    n_el = fen.shape[0] - 1
    x = e + 1
    while x <= n_el:
        fen[x] += delta
        x += x & (-x)


@njit(cache=True, nogil=True)
def _fen_find(fen, u):
    """The 0-based position ``e`` whose cumulative range ``[F(e), F(e + 1))`` holds ``u``
    (``0 <= u < total``): the cell of the unit numbered ``u``."""
    n_el = fen.shape[0] - 1
    pos = 0
    step = 1
    while step * 2 <= n_el:
        step *= 2
    while step > 0:
        nxt = pos + step
        if nxt <= n_el and fen[nxt] <= u:
            pos = nxt
            u -= fen[nxt]
        step //= 2
    if pos >= n_el:
        pos = n_el - 1
    return pos


@njit(cache=True, nogil=True)
def _pair_update_c(i, j, c, log_p, col_alpha, cell_ptr, cell_coord, cell_coef, w, l2, r, b_idx,
                   b_r, b_v, b_w, b_l2, rng):
    """The exact pair move between cells ``i`` and ``j`` (:func:`pair_move_c`; collapsed --
    theta integrated out, Dirichlet concentrations ``col_alpha[i], col_alpha[j] >= 1`` -- when
    ``col_alpha[i] > 0``); updates ``c`` and the residuals ``r``; returns ``k`` (units moved
    from ``j`` to ``i``)."""
    ai = col_alpha[i]
    if ai <= 0.0 and (log_p[i] == -np.inf or log_p[j] == -np.inf):
        return 0.0          # a zero-probability cell holds 0 units: the conditional is k = 0
    if c[i] == 0.0 and c[j] == 0.0:
        return 0.0
    # coordinates touched: v_m = A[m, i] - A[m, j]
    m = 0
    for q in range(cell_ptr[i], cell_ptr[i + 1]):
        b_idx[m] = cell_coord[q]
        b_v[m] = cell_coef[q]
        m += 1
    for q in range(cell_ptr[j], cell_ptr[j + 1]):
        cc = cell_coord[q]
        found = False
        for t in range(m):
            if b_idx[t] == cc:
                b_v[t] -= cell_coef[q]
                found = True
                break
        if not found:
            b_idx[m] = cc
            b_v[m] = -cell_coef[q]
            m += 1
    mm = 0
    for t in range(m):
        if b_v[t] != 0.0:
            b_idx[mm] = b_idx[t]
            b_v[mm] = b_v[t]
            b_r[mm] = r[b_idx[t]]
            b_w[mm] = w[b_idx[t]]
            b_l2[mm] = l2[b_idx[t]]
            mm += 1
    dlp = 0.0 if ai > 0.0 else log_p[i] - log_p[j]
    k = pair_move_c(c[i], c[j], dlp, ai, col_alpha[j], b_r, b_v, b_w, b_l2, mm, rng)
    if k != 0.0:
        c[i] += k
        c[j] -= k
        for t in range(mm):
            r[b_idx[t]] -= k * b_v[t]
    return k


@njit(cache=True, nogil=True)
def _group_partner(x, cell_grp, grp_ptr, grp_cells, rng):
    """A cell drawn uniformly among the *other* cells of ``x``'s Multinomial group (one
    ``rng.integers`` draw over ``size - 1`` slots; the slot of ``x`` itself stands for the
    group's last cell)."""
    g = cell_grp[x]
    g0 = grp_ptr[g]
    size = grp_ptr[g + 1] - g0
    y = grp_cells[g0 + rng.integers(0, size - 1)]
    if y == x:
        y = grp_cells[g0 + size - 1]
    return y


@njit(cache=True, nogil=True)
def pair_sweep_c(c, log_p, col_alpha, n_pairs, unit_frac, eligible, el_pos, fen, cell_grp,
                 grp_ptr, grp_cells, cell_ptr, cell_coord, cell_coef, s, w, l2, r, b_idx, b_r,
                 b_v, b_w, b_l2, rng):
    """``n_pairs`` exact pair moves on the table ``c`` (updated in place); returns the number of
    units moved (sum of ``|k|``).

    Each move first chooses its unordered pair of cells ``{i, j}`` of one group, then draws the
    units moved between them from their exact full conditional (:func:`pair_move`). The pair is
    chosen by one of two schemes, the second with probability ``unit_frac``:

    * **uniform**: ``i`` uniform among the eligible cells, ``j`` uniform among the other cells
      of its group -- a selection law that does not depend on the state;
    * **by unit**: a unit uniform among the ``U`` units of the eligible cells (its cell ``j``
      has probability ``c_j / U``, drawn from a Fenwick tree of the counts), ``i`` uniform
      among the other ``|g| - 1`` cells of ``j``'s group. The unordered pair ``{i, j}`` is then
      chosen with probability ``(c_i + c_j) / (U (|g| - 1))``, which depends on the state only
      through ``c_i + c_j`` and ``U`` -- both unchanged by any move between ``i`` and ``j``. So
      for every pair ``P`` and states ``c, c'`` on its line, ``pi(c) s(P | c) K_P(c, c') =
      pi(c') s(P | c') K_P(c', c)``: the state-dependent selection needs no correction. It
      spends the moves where the units are (at a few units per cell, most uniform pairs are two
      empty cells and move nothing).

    A constant-probability mixture of the two reversible kernels is reversible.

    ``c`` (J,) float64 integer counts; ``log_p`` (J,) log cell probabilities; ``col_alpha`` (J,)
    zeros (moves conditional on theta), or the Dirichlet concentrations (all ``>= 1``) of a
    collapsed sweep (theta integrated out: the caller must draw theta from ``p(theta | c)``
    right after it); ``eligible`` (E,)
    the cells whose group has >= 2 cells, ``el_pos`` (J,) each cell's position in ``eligible``
    (-1 if none), ``fen`` (E+1,) work (the Fenwick tree); ``cell_grp`` (J,) group of each cell;
    ``grp_ptr`` (G+1,), ``grp_cells`` (J,): the cells of group ``g`` are
    ``grp_cells[grp_ptr[g]:grp_ptr[g+1]]``; ``cell_ptr`` (J+1,), ``cell_coord`` (nnz,) int64,
    ``cell_coef`` (nnz,): column ``j`` of ``A``; ``s, w, l2`` (d,): release, kernel weights,
    kernel family; ``r`` (d,) work (the residuals); ``b_*``: work buffers of length >= the
    largest number of coordinates two cells touch."""
    residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
    n_el = eligible.shape[0]
    moved = 0.0
    if n_el == 0:
        return moved
    units = 0.0
    if unit_frac > 0.0:
        units = _fen_build(c, eligible, fen)
    for _ in range(n_pairs):
        if unit_frac > 0.0 and (unit_frac >= 1.0 or rng.random() < unit_frac):
            if units <= 0.0:
                continue        # every eligible cell is empty: every pair move is k = 0
            j = eligible[_fen_find(fen, np.floor(rng.random() * units))]
            i = _group_partner(j, cell_grp, grp_ptr, grp_cells, rng)
        else:
            i = eligible[rng.integers(0, n_el)]
            j = _group_partner(i, cell_grp, grp_ptr, grp_cells, rng)
        k = _pair_update_c(i, j, c, log_p, col_alpha, cell_ptr, cell_coord, cell_coef, w, l2,
                           r, b_idx, b_r, b_v, b_w, b_l2, rng)
        if k != 0.0:
            moved += abs(k)
            if unit_frac > 0.0:
                _fen_add(fen, el_pos[i], k)
                _fen_add(fen, el_pos[j], -k)
    return moved


@njit(cache=True, nogil=True)
def matching_sweep(c, log_p, col_alpha, n_rounds, grp_ptr, grp_cells, perm, cell_ptr,
                   cell_coord, cell_coef, s, w, l2, r, b_idx, b_r, b_v, b_w, b_l2, rng):
    """``n_rounds`` rounds of exact pair moves along a random perfect matching of each group's
    cells: the group's cells in a uniformly random order (Fisher-Yates), then the pairs
    (1st, 2nd), (3rd, 4th), ... each moved by :func:`_pair_update_c` (an odd group leaves its
    last cell of that order out). The matching is drawn independently of the table, so each
    round is a composition of exact pair (Gibbs) updates in a state-independent random order and
    leaves the target invariant; unlike pairs drawn with replacement, every cell takes part in
    every round (with ``J`` pairs drawn at random a cell sits out a sweep with probability
    ``~ e^-2``). ``perm`` (J,) int64 work; other arguments as :func:`pair_sweep_c`. Returns the
    number of units moved."""
    residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
    moved = 0.0
    for _ in range(n_rounds):
        for g in range(grp_ptr.shape[0] - 1):
            g0 = grp_ptr[g]
            size = grp_ptr[g + 1] - g0
            if size < 2:
                continue
            for t in range(size):
                perm[t] = grp_cells[g0 + t]
            for t in range(size - 1, 0, -1):
                u = rng.integers(0, t + 1)
                tmp = perm[t]
                perm[t] = perm[u]
                perm[u] = tmp
            for t in range(0, size - 1, 2):
                k = _pair_update_c(perm[t], perm[t + 1], c, log_p, col_alpha, cell_ptr,
                                   cell_coord, cell_coef, w, l2, r, b_idx, b_r, b_v, b_w, b_l2,
                                   rng)
                moved += abs(k)
    return moved


@njit(cache=True, nogil=True)
def _pair_update(i, j, c, log_p, cell_ptr, cell_coord, cell_coef, w, l2, r, b_idx, b_r, b_v,
                 b_w, b_l2, rng):
    """:func:`_pair_update_c` conditional on theta (no collapsed cells)."""
    return _pair_update_c(i, j, c, log_p, np.zeros(c.shape[0]), cell_ptr, cell_coord,
                          cell_coef, w, l2, r, b_idx, b_r, b_v, b_w, b_l2, rng)


@njit(cache=True, nogil=True)
def pair_sweep(c, log_p, n_pairs, unit_frac, eligible, el_pos, fen, cell_grp, grp_ptr,
               grp_cells, cell_ptr, cell_coord, cell_coef, s, w, l2, r, b_idx, b_r, b_v, b_w,
               b_l2, rng):
    """:func:`pair_sweep_c` conditional on theta (every ``col_alpha`` zero)."""
    return pair_sweep_c(c, log_p, np.zeros(c.shape[0]), n_pairs, unit_frac, eligible, el_pos,
                        fen, cell_grp, grp_ptr, grp_cells, cell_ptr, cell_coord, cell_coef, s, w,
                        l2, r, b_idx, b_r, b_v, b_w, b_l2, rng)


@njit(cache=True, nogil=True)
def shift_log_ratio(c, c_new, lp, lp_new, cell_ptr, cell_coord, cell_coef, s, w, l2, r, r_new):
    """``log [prod_g Mult(c_new | lp_new) eta(s | A c_new)] - log [... (c | lp) ...]``; ``-inf`` if
    a cell of ``c_new`` is negative. Cancellation-free at ``N ~ 1e9``: the multinomial part is
    ``sum_j c_j (lp'_j - lp_j) + (c'_j - c_j) lp'_j - [lgamma(c'_j + 1) - lgamma(c_j + 1)]``
    (the ``lgamma(N_g + 1)`` terms cancel), and the noise part from the residuals
    (:func:`privpost.inference._kernels.log_eta_change`; not ``log_eta(r_new) - log_eta(r)``,
    which cancels when ``s`` is far from every feasible table; the change ``A (c_new - c)``
    from the tables, :func:`table_change`). ``r`` (d,) is filled with ``s - A c``, ``r_new``
    with ``r - A (c_new - c)`` (``s - A c_new``)."""
    out = 0.0
    for j in range(c.shape[0]):
        cn = c_new[j]
        if cn < 0.0:
            return -np.inf
        co = c[j]
        if co != 0.0:
            out += co * (lp_new[j] - lp[j])
        if cn != co:
            out += (cn - co) * lp_new[j]
            out -= _lgamma_diff(co + 1.0, cn - co)
    residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
    table_change(c, c_new, cell_ptr, cell_coord, cell_coef, r_new)
    out += log_eta_change(r, r_new, w, l2)
    for m in range(r.shape[0]):
        r_new[m] = r[m] - r_new[m]
    if out != out:
        return -np.inf
    return out


@njit(cache=True, nogil=True)
def _dirichlet_draw(c, alpha, grp_ptr, grp_cells, p, lp, rng):
    """``p_g ~ Dirichlet(alpha_g + c_g)`` in every group (gamma normalisation); ``lp = log p``."""
    for g in range(grp_ptr.shape[0] - 1):
        tot = 0.0
        for q in range(grp_ptr[g], grp_ptr[g + 1]):
            j = grp_cells[q]
            x = rng.standard_gamma(alpha[j] + c[j])
            p[j] = x
            tot += x
        if not tot > 0.0:       # every gamma underflowed (tiny concentrations): in log space
            ln = grp_ptr[g + 1] - grp_ptr[g]
            conc = np.empty(ln)
            draw = np.empty(ln)
            for q in range(ln):
                j = grp_cells[grp_ptr[g] + q]
                conc[q] = alpha[j] + c[j]
            log_space_dirichlet(conc, draw, rng)
            for q in range(ln):
                p[grp_cells[grp_ptr[g] + q]] = draw[q]
            tot = 1.0
        for q in range(grp_ptr[g], grp_ptr[g + 1]):
            j = grp_cells[q]
            p[j] = p[j] / tot
            lp[j] = math.log(p[j]) if p[j] > 0.0 else -np.inf


@njit(cache=True, nogil=True)
def dirichlet_iterations(n_iter, keep, adapting, c, p, lp, alpha, col_alpha, totals, n_pairs,
                         unit_frac, n_match, perm,
                         n_shift, eligible, el_pos, fen, cell_grp, grp_ptr, grp_cells, last,
                         cell_ptr, cell_coord, cell_coef, s, w, l2, log_const, r, r_new, b_idx,
                         b_r, b_v, b_w, b_l2, c_new, p_new, lp_new, v, vp, z, iw_f, iw_i, mean, m2,
                         chol, counts, out_p, out_log_eta, rng):
    """``n_iter`` iterations of the count-table chain (module docstring) for Dirichlet priors on
    the groups' cell probabilities (``alpha`` (J,)), entirely compiled: pair sweep, the
    conjugate draw ``p_g ~ Dirichlet(alpha_g + c_g)``, ``n_shift`` residual-shift moves in the
    additive log-ratio coordinates ``v_j = log(p_j / p_last(g))`` (the cells but the last of
    each group; ``dim = J - G``), whose target density is ``prod_j p_j^alpha_j`` (the Dirichlet
    density times the Jacobian ``prod_j p_j``). The proposal ``v' = v + e^{iw_f[0]} chol z``
    adapts (``_damcmc_fast._iw_adapt``) while ``adapting``. With ``keep``, row ``t`` of
    ``out_p`` (n_iter, J) / ``out_log_eta`` (n_iter,) gets the state after iteration ``t``.
    ``counts``: [shift proposals, shift acceptances] after the warm-up (updated)."""
    J = c.shape[0]
    G = grp_ptr.shape[0] - 1
    dim = v.shape[0]
    for t in range(n_iter):
        # collapsed sweep (col_alpha = alpha) or one given p (zeros); either way p is drawn
        # from p(p | c) right after it, which makes the pair (sweep, draw) exact
        if n_match > 0:
            matching_sweep(c, lp, col_alpha, n_match, grp_ptr, grp_cells, perm, cell_ptr,
                           cell_coord, cell_coef, s, w, l2, r, b_idx, b_r, b_v, b_w, b_l2, rng)
        if n_pairs > 0:
            pair_sweep_c(c, lp, col_alpha, n_pairs, unit_frac, eligible, el_pos, fen, cell_grp,
                         grp_ptr, grp_cells, cell_ptr, cell_coord, cell_coef, s, w, l2, r,
                         b_idx, b_r, b_v, b_w, b_l2, rng)
        _dirichlet_draw(c, alpha, grp_ptr, grp_cells, p, lp, rng)
        if n_shift > 0 and dim > 0:
            # free coordinates and log target at the current p
            ok = True
            for j in range(J):
                if not lp[j] > -np.inf:
                    ok = False
            if ok:
                lt = 0.0
                for j in range(J):
                    lt += alpha[j] * lp[j]
                q = 0
                for g in range(G):
                    lj = lp[last[g]]
                    for k in range(grp_ptr[g], grp_ptr[g + 1]):
                        j = grp_cells[k]
                        if j != last[g]:
                            v[q] = lp[j] - lj
                            q += 1
                for _ in range(n_shift):
                    _iw_propose(dim, v, iw_f, chol, z, vp, rng)
                    log_u = math.log1p(-rng.random())
                    # p' = softmax([v', 0]) per group
                    q = 0
                    okp = True
                    for g in range(G):
                        mx = 0.0
                        q0 = q
                        for k in range(grp_ptr[g], grp_ptr[g + 1]):
                            if grp_cells[k] != last[g]:
                                if vp[q] > mx:
                                    mx = vp[q]
                                q += 1
                        tot = math.exp(-mx)
                        q = q0
                        for k in range(grp_ptr[g], grp_ptr[g + 1]):
                            if grp_cells[k] != last[g]:
                                tot += math.exp(vp[q] - mx)
                                q += 1
                        lt_ = math.log(tot) + mx
                        q = q0
                        for k in range(grp_ptr[g], grp_ptr[g + 1]):
                            j = grp_cells[k]
                            if j != last[g]:
                                lp_new[j] = vp[q] - lt_
                                q += 1
                            else:
                                lp_new[j] = -lt_
                        for k in range(grp_ptr[g], grp_ptr[g + 1]):
                            j = grp_cells[k]
                            p_new[j] = math.exp(lp_new[j])
                            if not p_new[j] > 0.0:
                                okp = False
                    alpha_acc = 0.0
                    if okp:
                        ltp = 0.0
                        for j in range(J):
                            ltp += alpha[j] * lp_new[j]
                        # the table moved with theta: residuals fixed off the last cells
                        for g in range(G):
                            rest = 0.0
                            for k in range(grp_ptr[g], grp_ptr[g + 1]):
                                j = grp_cells[k]
                                if j != last[g]:
                                    c_new[j] = c[j] + (np.floor(totals[g] * p_new[j] + 0.5)
                                                       - np.floor(totals[g] * p[j] + 0.5))
                                    rest += c_new[j]
                            c_new[last[g]] = totals[g] - rest
                        la = shift_log_ratio(c, c_new, lp, lp_new, cell_ptr, cell_coord,
                                             cell_coef, s, w, l2, r, r_new) + ltp - lt
                        if la != la:
                            la = -np.inf
                        alpha_acc = 1.0 if la >= 0.0 else math.exp(la)
                        if log_u < la:
                            for j in range(J):
                                c[j] = c_new[j]
                                p[j] = p_new[j]
                                lp[j] = lp_new[j]
                            for a in range(dim):
                                v[a] = vp[a]
                            lt = ltp
                            if not adapting:
                                counts[1] += 1
                    if adapting:
                        _iw_adapt(v, alpha_acc, iw_f, iw_i, mean, m2, chol)
                    else:
                        counts[0] += 1
        if keep:
            for j in range(J):
                out_p[t, j] = p[j]
            residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
            out_log_eta[t] = log_const + log_eta(r, w, l2)


# ============================================================================================
# the released coordinates
# ============================================================================================

class Coordinates:
    """The ``d`` released coordinates of a table: ``s`` (d,), kernel weights ``w`` (d,), kernel
    family ``l2`` (d,) bool, noise scales ``scale`` (d,), ``A`` (d, J) (given dense or
    ``scipy.sparse``; stored as a CSC matrix: column ``j`` = cell ``j``) and
    ``log_const``, the noise densities' log normalising constant (``log eta(s | A c) =
    log_const + log_eta(s - A c)``).

    Build with :meth:`from_releases` from releases of the same table, each with its own ``A``
    block (rows stacked in the releases' order)."""

    def __init__(self, A, s, scale, l2, log_const: float = 0.0):
        from scipy import sparse

        self.A = sparse.csc_matrix(A, dtype=np.float64)
        self.A.eliminate_zeros()
        self.A.sort_indices()
        self.s = np.ascontiguousarray(s, dtype=np.float64)
        self.scale = np.ascontiguousarray(scale, dtype=np.float64)
        self.l2 = np.ascontiguousarray(l2, dtype=np.bool_)
        d = self.s.shape[0]
        if self.A.shape[0] != d or self.scale.shape != (d,) or \
                self.l2.shape != (d,):
            raise PrivpostError(f"count table: A must be (d, J) with d = {d} released values")
        self.w = np.array([weights_for("l2" if b else "l1", sc, 1)[0]
                           for b, sc in zip(self.l2, self.scale)], dtype=np.float64)
        self.log_const = float(log_const)

    @classmethod
    def from_releases(cls, releases, blocks):
        """``releases``: list of :class:`privpost.Release` (additive mechanisms with a kernel);
        ``blocks``: one ``(d_r, J)`` array (dense or sparse) per release, its query as a
        linear map of the table."""
        A, s, scale, l2 = [], [], [], []
        log_const = 0.0
        for rel, blk in zip(releases, blocks):
            mech = rel.mechanism
            if getattr(mech, "kernel", None) not in ("l1", "l2") or mech.scale is None:
                raise PrivpostError(f"count table: mechanism {type(mech).__name__} has no "
                                    "additive l1/l2 kernel")
            obs = np.asarray(rel.observed, dtype=np.float64)
            A.append(blk)
            s.append(obs)
            scale.append(np.broadcast_to(np.asarray(mech.scale, dtype=np.float64), obs.shape))
            l2.append(np.full(obs.shape, mech.kernel == "l2"))
            log_const += float(mech.logpdf(obs, obs))       # the density at zero noise
        from scipy import sparse

        return cls(sparse.vstack([sparse.csc_matrix(b, dtype=np.float64) for b in A]),
                   np.concatenate(s), np.concatenate(scale), np.concatenate(l2), log_const)


# ============================================================================================
# starts
# ============================================================================================

def project_simplex_int(x, total):
    """The integer vector nearest (Euclidean projection, then largest-remainder rounding) to
    ``x`` (J,) among ``{c >= 0 integer, sum c = total}``."""
    x = np.asarray(x, dtype=np.float64)
    J = x.shape[0]
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - total
    idx = np.arange(1, J + 1)
    cond = u - css / idx > 0
    rho = idx[cond][-1] if np.any(cond) else J
    tau = css[rho - 1] / rho
    y = np.maximum(x - tau, 0.0)
    y *= total / y.sum() if y.sum() > 0 else 0.0
    if not y.sum() > 0:
        y = np.full(J, total / J)
    fl = np.floor(y)
    left = int(round(total - fl.sum()))
    if left > 0:
        order = np.argsort(-(y - fl), kind="stable")
        fl[order[:left]] += 1.0
    elif left < 0:
        order = np.argsort(y - fl, kind="stable")
        sub = [i for i in order if fl[i] > 0][:(-left)]
        fl[sub] -= 1.0
    return fl


#: Sweeps of iterative proportional fitting in :func:`ipf_table`.
IPF_SWEEPS = 60


def ipf_table(A, s_star, grp_cells: list, totals, sweeps: int = IPF_SWEEPS):
    """Iterative proportional fitting of a real table to released counts: for ``A`` (d, J) with
    0/1 entries (marginal-table and naive-Bayes releases), starting from the uniform table of
    each group, every sweep scales each group to its total and then, row by row, the cells row
    ``m`` counts by ``max(s*_m, 1/2) / (A c)_m``. The result is the maximum-entropy (product-form)
    table whose margins are the released ones (Deming & Stephan 1940), a start near the
    multinomial's mode -- unlike a least-squares table, whose negative cells (clipped) throw the
    margins off by up to ``~ n`` (measured: 2.5e6 at n = 1e8 on seed 000's naive-Bayes table).
    Returns the real table (J,)."""
    A = A.tocsr()
    J = A.shape[1]
    target = np.maximum(np.asarray(s_star, dtype=np.float64), 0.5)
    c = np.zeros(J)
    for cells, tot in zip(grp_cells, totals):
        c[cells] = tot / len(cells)
    rows = [A.indices[A.indptr[m]:A.indptr[m + 1]] for m in range(A.shape[0])]
    for _ in range(int(sweeps)):
        for m, cols in enumerate(rows):
            cur = c[cols].sum()
            if cur > 0:
                c[cols] *= target[m] / cur
        for cells, tot in zip(grp_cells, totals):
            t = c[cells].sum()
            c[cells] = c[cells] * (tot / t) if t > 0 else tot / len(cells)
    return c


def data_table(coords: Coordinates, grp_cells: list, totals, rng):
    """A dispersed data-driven start: the release re-noised (fresh noise of each coordinate's
    scale, Gaussian or Laplace by its family), then the table fitted to it under the group
    totals -- by iterative proportional fitting (:func:`ipf_table`) when ``A`` is a 0/1 matrix
    touching every cell (marginal tables, naive-Bayes counts, histograms), else by least squares
    (the totals as heavily weighted rows) -- projected onto the integer tables of those totals.
    Returns ``c`` (J,) float64."""
    A, s = coords.A, coords.s
    sd = np.where(coords.l2, coords.scale, coords.scale * math.sqrt(2.0))
    noise = np.where(coords.l2, rng.standard_normal(s.shape),
                     rng.laplace(0.0, 1.0, s.shape) / math.sqrt(2.0))
    s_star = s + sd * noise
    if A.nnz and np.all(A.data == 1.0) and np.all(np.diff(A.indptr) > 0):
        sol = ipf_table(A, s_star, grp_cells, totals)
        c = np.zeros(A.shape[1])
        for cells, tot in zip(grp_cells, totals):
            c[cells] = project_simplex_int(sol[cells], tot)
        return c
    from scipy import sparse
    from scipy.sparse.linalg import lsqr

    J = A.shape[1]
    As = sparse.diags(1.0 / sd) @ A
    big = 1e3 * max(1.0, float(np.max(np.abs(As.data))) if As.nnz else 1.0)
    G = sparse.csr_matrix((np.full(J, big), (np.concatenate(
        [np.full(len(cells), g) for g, cells in enumerate(grp_cells)]),
        np.concatenate(grp_cells))), shape=(len(grp_cells), J))
    M = sparse.vstack([As, G]).tocsr()
    b = np.concatenate([s_star / sd, big * np.asarray(totals, dtype=np.float64)])
    # centre on the uniform table so that cells A does not identify stay near equal shares
    c_ref = np.zeros(J)
    for cells, tot in zip(grp_cells, totals):
        c_ref[cells] = tot / len(cells)
    if M.shape[0] * J <= 4_000_000:
        sol = np.linalg.lstsq(M.toarray(), b - M @ c_ref, rcond=None)[0] + c_ref
    else:   # large tables: an iterative least-squares start (only a start: it is projected)
        sol = lsqr(M, b - M @ c_ref, atol=1e-10, btol=1e-10, iter_lim=2000)[0] + c_ref
    c = np.zeros(J)
    for cells, tot in zip(grp_cells, totals):
        c[cells] = project_simplex_int(sol[cells], tot)
    return c


# ============================================================================================
# the latent
# ============================================================================================

class CountTable(CountLatent):
    """The count-table latent (module docstring) of a model's parameters theta.

    Parameters
    ----------
    names : list of str
        The Posterior's parameter names (the model's ``param_shapes`` order).
    shapes : dict name -> tuple
        Shape of each parameter.
    groups : list of (J_g,) int arrays
        The cells of each Multinomial group (a partition of ``0..J-1``).
    totals : (G,) ints
        Public total ``N_g`` of each group (conditioned on).
    coords : Coordinates
        The released coordinates: ``A`` (d, J), ``s`` (d,), noise scales and kernel families.
    log_probs : callable ``params -> (J,)``
        Log cell probabilities (within each group they sum to 1).
    update : callable ``(params, c, rng) -> params``
        Draw of theta given the table ``c`` (J,) (exact conditional, or any kernel leaving
        ``p(theta | c)`` invariant).
    prior_sample : callable ``rng -> params``
    log_prior : callable ``params -> float``
        Needed by the residual-shift move only.
    free : tuple ``(to_free, from_free, log_jacobian)`` or None
        Free coordinates of theta for the residual-shift move: ``to_free(params) -> (q,)``,
        ``from_free(params, v) -> params``, ``log_jacobian(params) = log |d theta / d v|``.
        ``None``: no non-centred move.
    table : str
        The posterior note's description of the table and its law.
    n_pairs : int or None
        Pair moves per iteration (default: :func:`default_pairs`).
    n_shift : int
        Residual-shift moves per iteration (default 2; 0: none).
    unit_frac : float in [0, 1] or None
        Fraction of the pair moves whose pair is chosen by unit (a unit uniform among the
        table's units, a partner cell uniform in its group; :func:`pair_sweep`), the others by
        a uniform pair (default :data:`DEFAULT_UNIT_FRAC`).
    collapsed : bool or None
        Pair moves with theta integrated out (:func:`pair_sweep_c` with ``col_alpha = alpha``;
        Dirichlet priors with every concentration ``>= 1`` only, where that conditional is
        log-concave); ``None``: :data:`DEFAULT_COLLAPSED` where allowed.
    dirichlet : tuple ``(alpha, to_params, from_params)`` or None
        For Dirichlet priors on every group's cell probabilities: ``alpha`` (J,) the prior
        concentrations (theta is ``p`` (J,), the update ``Dirichlet(alpha_g + c_g)``), and the
        maps ``to_params(P) -> {name: (k, *shape)}`` from rows ``P`` (k, J) of ``p`` and
        ``from_params(params) -> p`` (J,). The whole iteration then runs compiled
        (:func:`dirichlet_iterations`, its non-centred move in additive log-ratio coordinates);
        ``log_probs``, ``update``, ``log_prior`` and ``free`` still define the same law and
        serve the start.
    """

    def __init__(self, *, names, shapes, groups, totals, coords: Coordinates, log_probs, update,
                 prior_sample, log_prior=None, free=None, table: str = "", n_pairs=None,
                 n_shift: int = 2, dirichlet=None, unit_frac=None, collapsed=None):
        from privpost.limits import check_latent

        self.names = list(names)
        self.shapes = {k: tuple(v) for k, v in shapes.items()}
        self.coords = coords
        J = coords.A.shape[1]
        check_latent("count table", J, 1)
        self.J = J
        self.groups = [np.asarray(g, dtype=np.int64) for g in groups]
        self.totals = np.asarray(totals, dtype=np.float64)
        allc = np.sort(np.concatenate(self.groups)) if self.groups else np.zeros(0, np.int64)
        if allc.shape[0] != J or np.any(allc != np.arange(J)) or \
                len(self.groups) != self.totals.shape[0]:
            raise PrivpostError("count table: groups must partition the table's cells, one "
                                "total per group")
        if np.any(self.totals < 0) or np.any(self.totals != np.round(self.totals)):
            raise PrivpostError("count table: group totals must be non-negative integers")
        self.log_probs, self.update, self.prior_sample = log_probs, update, prior_sample
        self.log_prior, self.free = log_prior, free
        if free is not None and log_prior is None:
            raise PrivpostError("count table: the residual-shift move needs log_prior")
        self.table = table
        self.stat_names = ("log_eta",)
        self.n_pairs = default_pairs(J, float(self.totals.sum())) if n_pairs is None \
            else int(n_pairs)
        self.unit_frac = DEFAULT_UNIT_FRAC if unit_frac is None else float(unit_frac)
        if not 0.0 <= self.unit_frac <= 1.0:
            raise PrivpostError(f"count table: unit_frac must be in [0, 1], got {unit_frac!r}")
        self.n_shift = int(n_shift) if free is not None else 0
        # sparse A by cell
        A = coords.A      # CSC: column j = the released coordinates cell j adds to
        self.cell_ptr = np.ascontiguousarray(A.indptr, dtype=np.int64)
        self.cell_coord = np.ascontiguousarray(A.indices, dtype=np.int64)
        self.cell_coef = np.ascontiguousarray(A.data, dtype=np.float64)
        self.cell_grp = np.zeros(J, dtype=np.int64)
        gp, gc = [0], []
        for g, cells in enumerate(self.groups):
            self.cell_grp[cells] = g
            gc.extend(cells.tolist())
            gp.append(len(gc))
        self.grp_ptr = np.array(gp, dtype=np.int64)
        self.grp_cells = np.array(gc, dtype=np.int64)
        sizes = np.array([len(g) for g in self.groups], dtype=np.int64)
        self.eligible = np.flatnonzero(sizes[self.cell_grp] > 1).astype(np.int64)
        self.el_pos = np.full(J, -1, dtype=np.int64)
        self.el_pos[self.eligible] = np.arange(self.eligible.shape[0], dtype=np.int64)
        nnz = np.diff(self.cell_ptr)
        self.buf = int(2 * nnz.max()) if J else 1
        self.last = np.array([cells[-1] for cells in self.groups], dtype=np.int64)
        self.free_cells = np.ones(J, dtype=bool)
        self.free_cells[self.last] = False
        free_dim = J - len(self.groups)
        if free_dim > MAX_SHIFT_DIM:
            self.n_shift = 0          # the move's dense proposal covariance would not fit
        self.dirichlet = dirichlet
        if dirichlet is not None:
            self.alpha = np.ascontiguousarray(dirichlet[0], dtype=np.float64)
            if self.alpha.shape != (J,) or not np.all(self.alpha > 0):
                raise PrivpostError("count table: dirichlet alpha must be (J,) positive")
            self.n_shift = int(n_shift) if free_dim <= MAX_SHIFT_DIM else 0
        # collapsed pair moves (theta integrated out) where their conditional is log-concave
        can = dirichlet is not None and bool(np.all(self.alpha >= 1.0))
        if collapsed is None:
            collapsed = can and DEFAULT_COLLAPSED
        if collapsed and not can:
            raise PrivpostError("count table: collapsed pair moves need Dirichlet priors with "
                                "every concentration >= 1")
        self.collapsed = bool(collapsed)
        self.col_alpha = self.alpha.copy() if self.collapsed else np.zeros(J)
        # few units per cell (the default asks for >= J/2 random pairs): one round of pairs along
        # a random matching instead, every cell moved once (measured: DEFAULT_COLLAPSED's note)
        self.n_match = 0
        if self.collapsed and n_pairs is None and 2 * self.n_pairs >= J:
            self.n_match, self.n_pairs = 1, 0
        if self.collapsed and J == 2 and len(self.groups) == 1:
            # the one collapsed pair move is an exact draw of c from p(c | s), the theta draw
            # one from p(theta | c): every iteration is an independent exact draw of the
            # posterior (the theta-marginal sampler of a 0/1 sum), no non-centred move needed
            self.n_shift = 0

    # -- pieces used by the chains --------------------------------------------------------
    def start(self, rng, start: str):
        """``(params, c)`` of one chain."""
        if start == "prior":
            params = self.prior_sample(rng)
            c = self.sample_table(params, rng)
        else:
            c = data_table(self.coords, self.groups, self.totals, rng)
            params = self.update(self.prior_sample(rng), c, rng)
        return params, c

    def sample_table(self, params, rng):
        """``c ~ prod_g Multinomial(N_g, p_g(theta))`` (J,) float64."""
        p = np.exp(self.log_probs(params))
        c = np.zeros(self.J)
        for cells, tot in zip(self.groups, self.totals):
            pg = p[cells] / p[cells].sum()
            c[cells] = rng.multinomial(int(tot), pg)
        return c

    def rounded(self, lp):
        """``round(N_g p_j)`` (half up) on every cell (J,)."""
        out = np.zeros(self.J)
        p = np.exp(lp)
        for cells, tot in zip(self.groups, self.totals):
            out[cells] = np.floor(tot * p[cells] + 0.5)
        return out

    def shifted(self, c, lp, lp_new):
        """The table moved with theta (residuals fixed on the free cells; the last cell of each
        group takes the rest)."""
        c_new = c + (self.rounded(lp_new) - self.rounded(lp))
        for cells, tot, last in zip(self.groups, self.totals, self.last):
            c_new[last] = tot - (c_new[cells].sum() - c_new[last])
        return c_new

    def chains(self, rngs, start: str) -> list:
        if self.dirichlet is not None:
            return [DirichletTableChain(self, rng, start) for rng in rngs]
        return [TableChain(self, rng, start) for rng in rngs]

    def _moves(self) -> str:
        """The table moves of one iteration, for the notes."""
        kind = (" collapsed (theta integrated out: Dirichlet-multinomial weights; theta then "
                "drawn given the table)" if self.collapsed else "")
        if self.n_match:
            return (f"{self.n_match} round{'s' if self.n_match > 1 else ''} of exact pair moves"
                    f"{kind} along a random matching of the cells")
        return (f"{self.n_pairs} exact pair moves{kind} ({self.unit_frac:.0%} of them chosen by "
                "unit)")

    def extra_notes(self, results: list[dict]) -> list[str]:
        notes = []
        if self.n_shift:
            acc = [r["shift_accept"] for r in results]
            notes.append(f"count table: {self._moves()}, the theta update and "
                         f"{self.n_shift} residual-shift (non-centred) moves per iteration; "
                         f"shift acceptance after warm-up {min(acc):.2f}-{max(acc):.2f}")
        else:
            why = (f" (no non-centred move: more than {MAX_SHIFT_DIM} free cells)"
                   if self.J - len(self.groups) > MAX_SHIFT_DIM else "")
            notes.append(f"count table: {self._moves()} and the theta update "
                         f"per iteration{why}")
        return notes


class TableChain:
    """One resumable chain on a :class:`CountTable` (the interface of
    :func:`privpost.inference._until.run_rounds`). State: ``params``, the table ``c`` (J,)."""

    def __init__(self, law: CountTable, rng, start: str):
        from privpost.inference.damcmc import _IWState

        self.law, self.rng = law, rng
        self.params, self.c = law.start(rng, start)
        self.c = np.ascontiguousarray(self.c, dtype=np.float64)
        self.lp = np.ascontiguousarray(law.log_probs(self.params), dtype=np.float64)
        d = law.coords.s.shape[0]
        self.r = np.zeros(d)
        self.r_new = np.zeros(d)
        b = max(law.buf, 1)
        self.b_idx = np.zeros(b, dtype=np.int64)
        self.b_r, self.b_v, self.b_w = np.zeros(b), np.zeros(b), np.zeros(b)
        self.b_l2 = np.zeros(b, dtype=np.bool_)
        self.fen = np.zeros(law.eligible.shape[0] + 1)
        self.perm = np.zeros(law.J, dtype=np.int64)
        self.done = 0
        self.n_stored = 0
        self._blocks = {nm: [] for nm in list(law.names) + ["log_eta"]}
        self._shapes = {**law.shapes, "log_eta": ()}
        self.iw = None
        if law.n_shift:
            v = np.asarray(law.free[0](self.params), dtype=np.float64)
            self.iw = _IWState(v.shape[0])
        self.shift_prop = 0
        self.shift_acc = 0

    def _shift(self, adapting: bool) -> None:
        law, iw, rng = self.law, self.iw, self.rng
        to_free, from_free, log_jac = law.free
        params = self.params
        v = np.asarray(to_free(params), dtype=np.float64)
        lpr = float(law.log_prior(params)) + float(log_jac(params))
        co = law.coords
        for _ in range(law.n_shift):
            z = rng.standard_normal(iw.dim)
            log_u = math.log1p(-rng.random())
            vp = v + math.exp(iw.log_s) * (iw.chol @ z)
            prop = from_free(params, vp)
            lprp = float(law.log_prior(prop)) + float(log_jac(prop))
            alpha = 0.0
            if lprp > -math.inf:
                lp_new = np.ascontiguousarray(law.log_probs(prop), dtype=np.float64)
                c_new = law.shifted(self.c, self.lp, lp_new)
                la = shift_log_ratio(self.c, c_new, self.lp, lp_new, law.cell_ptr,
                                     law.cell_coord, law.cell_coef, co.s, co.w, co.l2, self.r,
                                     self.r_new) + lprp - lpr
                if la != la:
                    la = -math.inf
                alpha = 1.0 if la >= 0 else math.exp(la)
                if log_u < la:
                    params, v, lpr = prop, vp, lprp
                    self.c, self.lp = c_new, lp_new
                    if not adapting:
                        self.shift_acc += 1
            if adapting:
                iw.adapt(v, alpha)
            else:
                self.shift_prop += 1
        self.params = params

    def _iterate(self, adapting: bool) -> None:
        law, co = self.law, self.law.coords
        if law.n_match:
            matching_sweep(self.c, self.lp, law.col_alpha, law.n_match, law.grp_ptr,
                           law.grp_cells, self.perm, law.cell_ptr, law.cell_coord,
                           law.cell_coef, co.s, co.w, co.l2, self.r, self.b_idx, self.b_r,
                           self.b_v, self.b_w, self.b_l2, self.rng)
        pair_sweep_c(self.c, self.lp, law.col_alpha, law.n_pairs, law.unit_frac, law.eligible,
                     law.el_pos, self.fen, law.cell_grp, law.grp_ptr, law.grp_cells,
                     law.cell_ptr, law.cell_coord, law.cell_coef, co.s, co.w, co.l2, self.r,
                     self.b_idx, self.b_r, self.b_v, self.b_w, self.b_l2, self.rng)
        # right after a collapsed sweep: theta from p(theta | c) (law.update is exact there)
        self.params = law.update(self.params, self.c, self.rng)
        self.lp = np.ascontiguousarray(law.log_probs(self.params), dtype=np.float64)
        if self.iw is not None:
            self._shift(adapting)

    def run(self, k: int, keep: bool, progress=None) -> None:
        """``k`` more iterations (kept when ``keep``); the non-centred proposal adapts while
        draws are not kept (the warm-up) and is frozen after."""
        k = int(k)
        if k <= 0:
            return
        law = self.law
        co = law.coords
        if keep:
            out = {nm: np.empty((k,) + law.shapes[nm]) for nm in law.names}
            out["log_eta"] = np.empty(k)
        for t in range(k):
            self._iterate(adapting=not keep)
            if keep:
                for nm in law.names:
                    out[nm][t] = self.params[nm]
                residuals(self.c, law.cell_ptr, law.cell_coord, law.cell_coef, co.s, self.r)
                out["log_eta"][t] = co.log_const + log_eta(self.r, co.w, co.l2)
            self.done += 1
            if progress is not None:
                progress(self.done - 1)
        if keep:
            for nm in out:
                self._blocks[nm].append(out[nm])
            self.n_stored += k

    def result(self) -> dict:
        res = {nm: (np.concatenate(b) if b else np.empty((0,) + self._shapes[nm]))
               for nm, b in self._blocks.items()}
        if any(len(b) > 1 for b in self._blocks.values()):
            self._blocks = {nm: [res[nm]] for nm in res}
        res["n_stored"] = self.n_stored
        res["shift_accept"] = (self.shift_acc / self.shift_prop) if self.shift_prop else math.nan
        return res


class DirichletTableChain(TableChain):
    """A :class:`TableChain` whose iterations run compiled (:func:`dirichlet_iterations`):
    Dirichlet priors on the groups' cell probabilities (``law.dirichlet``)."""

    def __init__(self, law: CountTable, rng, start: str):
        self.law, self.rng = law, rng
        params, c = law.start(rng, start)
        J = law.J
        self.c = np.ascontiguousarray(c, dtype=np.float64)
        self.p = np.ascontiguousarray(law.dirichlet[2](params), dtype=np.float64)
        with np.errstate(divide="ignore"):
            self.lp = np.log(self.p)
        d = law.coords.s.shape[0]
        self.r, self.r_new = np.zeros(d), np.zeros(d)
        b = max(law.buf, 1)
        self.b_idx = np.zeros(b, dtype=np.int64)
        self.b_r, self.b_v, self.b_w = np.zeros(b), np.zeros(b), np.zeros(b)
        self.b_l2 = np.zeros(b, dtype=np.bool_)
        self.fen = np.zeros(law.eligible.shape[0] + 1)
        self.c_new, self.p_new, self.lp_new = np.zeros(J), np.zeros(J), np.zeros(J)
        self.perm = np.zeros(J, dtype=np.int64)
        dim = J - len(law.groups) if law.n_shift else 0     # no move: no proposal state
        self.v, self.vp, self.z = np.zeros(dim), np.zeros(dim), np.zeros(dim)
        # the compiled _IWState (same start and targets as damcmc._IWState)
        self.iw_f = np.array([math.log(0.1), 0.44 if dim == 1 else 0.3])
        self.iw_i = np.zeros(4, dtype=np.int64)
        self.mean, self.m2, self.chol = np.zeros(dim), np.zeros((dim, dim)), np.eye(dim)
        self.counts = np.zeros(2, dtype=np.int64)
        self.done = 0
        self.n_stored = 0
        self._blocks = {"p": [], "log_eta": []}
        self.iw = None

    @property
    def shift_prop(self):
        return int(self.counts[0])

    @property
    def shift_acc(self):
        return int(self.counts[1])

    def run(self, k: int, keep: bool, progress=None) -> None:
        k = int(k)
        if k <= 0:
            return
        law, co = self.law, self.law.coords
        out_p = np.empty((k if keep else 0, law.J))
        out_le = np.empty(k if keep else 0)
        dirichlet_iterations(
            k, keep, not keep, self.c, self.p, self.lp, law.alpha, law.col_alpha, law.totals,
            law.n_pairs, law.unit_frac, law.n_match, self.perm, law.n_shift, law.eligible, law.el_pos, self.fen, law.cell_grp,
            law.grp_ptr, law.grp_cells, law.last, law.cell_ptr, law.cell_coord, law.cell_coef,
            co.s, co.w, co.l2, co.log_const, self.r, self.r_new, self.b_idx, self.b_r, self.b_v,
            self.b_w, self.b_l2, self.c_new, self.p_new, self.lp_new, self.v, self.vp, self.z,
            self.iw_f, self.iw_i, self.mean, self.m2, self.chol, self.counts, out_p, out_le,
            self.rng)
        self.done += k
        if progress is not None:
            progress(self.done - 1)
        if keep:
            self._blocks["p"].append(out_p)
            self._blocks["log_eta"].append(out_le)
            self.n_stored += k

    def result(self) -> dict:
        law = self.law
        P = np.concatenate(self._blocks["p"]) if self._blocks["p"] else np.empty((0, law.J))
        le = np.concatenate(self._blocks["log_eta"]) if self._blocks["log_eta"] else \
            np.empty(0)
        if len(self._blocks["p"]) > 1:
            self._blocks = {"p": [P], "log_eta": [le]}
        res = dict(law.dirichlet[1](P))
        res["log_eta"] = le
        res["n_stored"] = self.n_stored
        res["shift_accept"] = (self.shift_acc / self.shift_prop) if self.shift_prop else math.nan
        return res
