"""The clique-margins count latent of naive Bayes (issue 21; DESIGN §10): impute the released
class-by-feature margins, not the joint table or the records.

Model and release
-----------------
``N`` records ``(y, x_1, ..., x_K)``: ``y ~ Cat(p)`` over ``I`` classes, ``x_k | y = i ~
Cat(q_k[i, :])`` over ``J_k`` levels, independent given the class; Dirichlet priors ``p ~
Dir(a)``, ``q_k[i, :] ~ Dir(b_ki)`` (``A = sum_i a_i``, ``B_ki = sum_j b_kij``). The release
(``NaiveBayesCounts``, one or several releases of the same records) is ``s = T m + noise`` where

    m[k, i, j] = #(y = i, x_k = j)            (the class-by-feature MARGINS, M = I sum_k J_k cells)

and ``T`` stacks one identity block per release (the released vector *is* ``m``, flattened
``(k, i, j)`` row-major). The likelihood ``prod p_y prod_k q_k[y, x_k]`` and the release depend on
the records only through ``m`` (the class counts are ``n_i = sum_j m[k, i, j]`` for every ``k``),
so ``m`` is an exact data-augmentation latent (DESIGN §10) as soon as its law is known.

The law of the margins
----------------------
Given theta: ``n ~ Mult(N, p)``; given ``n``, the features of the ``n_i`` class-``i`` records
are i.i.d. ``Cat(q_k[i])`` and independent across ``k``, so ``m[k, i, :] ~ Mult(n_i, q_k[i])``
independently over ``(k, i)``. The support is every non-negative integer ``m`` whose rows of one
class share a sum: ``sum_j m[k, i, j] = n_i`` for all ``k``, ``sum_i n_i = N``. Integrating theta
out (Dirichlet-multinomial, ``DM``):

    P(m) = DM(n; N, a) prod_{k, i} DM(m[k, i, :]; n_i, b_ki),
    DM(x; n, c) = n! / prod x_j!  Gamma(C) / Gamma(C + n)  prod_j Gamma(c_j + x_j) / Gamma(c_j).

The chain targets ``pi(m, theta | s) ∝ P(m | theta) p(theta) eta(s | T m)``, whose theta-marginal
is the exact private posterior (the same one as the record-level and the joint-table samplers).
Cost per iteration depends on ``M``, ``K`` and the noise, not on ``N``: 75 cells for seed 000's
model against 1,215 joint cells and 100 records (Table 1) or ``3 * 10^8`` records (census).

One iteration (compiled, :func:`margins_iterations`)
----------------------------------------------------
1. **Pair moves within a row** ``(k, i)`` (``n_i`` fixed): ``u`` units moved between levels ``j``
   and ``j'``, drawn exactly from their full conditional by the engine's exact log-concave
   sampler (:func:`privpost.inference._count_table.pair_sweep_c` / ``_pair_update_c``, pairs
   chosen by unit). Collapsed (the row's ``q_k[i]`` integrated out: DM weights ``Gamma(b + m) /
   Gamma(m + 1)`` times the noise terms of the coordinates the two cells feed) when every
   ``b_kij >= 1`` -- the conditional is log-concave exactly then (``_count_moves``, "Collapsed
   moves"); otherwise the multinomial weights given ``q_k[i]``. Each such move leaves
   ``pi(m, theta_U | s)`` invariant, ``theta_U`` the rows moved given theta.
2. **Unit refresh** (the image on the margins of "refresh ``k`` exchangeable records from the
   model", MH; the only move that changes the class counts): draw ``k`` from a law that does
   not depend on the state (``k = min(N, 1 + G)``, ``G`` geometric with mean ``mu - 1``,
   :func:`default_refresh_mean`), then

   * *remove* ``k`` units: their classes one after the other without replacement, class ``i``
     with probability ``n_i^cur / (N - t)``; each removed unit's level in every feature ``k`` with
     probability ``m^cur[k, i, j] / n_i^cur`` (without replacement within the row); leaving
     ``(n^-, m^-)`` on ``N - k`` units. The removed composition ``(r, d)`` has probability
     ``R = prod_i C(n_i, r_i) / C(N, k) * prod_{k,i} [prod_j C(m_kij, d_kij) / C(n_i, r_i)]``;
   * *add* ``k`` units from the collapsed Polya predictive, one after the other: class ``i``
     with probability ``(a_i + n_i^cur) / (A + N - k + t)``, then in every feature the level
     with probability ``(b_kij + m^cur_kij) / (B_ki + n_i^cur)``; composition ``(r', e)``,
     probability ``Q = k! / prod r'_i! prod_i [a_i + n^-_i]^(r'_i) / [A + N - k]^(k) * prod_{k,i}
     r'_i! / prod_j e_kij! prod_j [b_kij + m^-_kij]^(e_kij) / [B_ki + n^-_i]^(r'_i)``
     (``[x]^(t)`` the rising factorial).

   **The acceptance ratio is the noise ratio alone**, ``eta(s | T m') / eta(s | T m)``: writing
   out ``P(m) R Q`` for the path ``m -> m^- -> m'``, the class part is
   ``k! (N - k)! / (prod r_i! prod n^-_i!) * Gamma(A) / Gamma(A + N)^2 * Gamma(A + N - k) *
   k! / prod r'_i! * prod_i Gamma(a_i + n_i) Gamma(a_i + n'_i) / (Gamma(a_i) Gamma(a_i + n^-_i))``
   and the part of row ``(k, i)`` is ``r_i! r'_i! n^-_i! / (prod_j d_kij! e_kij! m^-_kij!) *
   Gamma(B_ki) Gamma(B_ki + n^-_i) / (Gamma(B_ki + n_i) Gamma(B_ki + n'_i)) * prod_j
   Gamma(b_kij + m_kij) Gamma(b_kij + m'_kij) / (Gamma(b_kij) Gamma(b_kij + m^-_kij))``: the
   combinatorial factors of ``P`` cancel with the removal probabilities, the Gamma factors of
   the prior with the predictive's, and what is left is symmetric under ``(m, r, d) <-> (m', r',
   e)`` -- the reverse path ``m' -> m^- -> m``. So ``P(m) K(m, m') = P(m') K(m', m)`` path by
   path, and ``min(1, eta'/eta)`` makes the move reversible for ``pi(m | s) ∝ P(m) eta(s | T m)``
   (theta integrated out; ``tests/test_count_margins.py`` checks it against enumeration, and
   that the ratio with a class-count term ``DM(n') / DM(n)`` added fails).
3. **Theta** ``~ p(theta | m)``: ``p ~ Dir(a + n)``, ``q_k[i] ~ Dir(b_ki + m[k, i])`` (exact).

4. **Quantile shift** (non-centred, where the noise dominates; off by default elsewhere):
   ``n_shift`` MH proposals of ``p`` with the margins following it through fixed uniforms of
   their sequential-binomial quantiles (:mod:`privpost.inference._margins_shift`, which derives
   it); it leaves ``pi(m, theta | s)`` invariant, so it can follow step 3.

Step 1 leaves ``pi(m, theta_U | s)`` invariant, step 2 ``pi(m | s)``, and step 3 restores the
joint from the marginal of ``m``: the composition is a partially collapsed Gibbs sampler whose
every stage conditions only on what the previous one left with its right law, so it leaves
``pi(m, theta | s)`` invariant. (``theta`` is only drawn in step 3; with every ``b >= 1`` the chain
on ``m`` runs with theta integrated out and the theta draws are the output.)

Clique trees
------------
Naive Bayes is the decomposable model whose junction tree is a star: cliques ``{y, x_k}``,
every separator the root ``{y}``. The code reads the margins through that shape only:
the root's counts ``n`` (the ``I`` cells of the separator), the clique tables ``m[k]`` (rows per
root value, each row summing to its root count), Dirichlet rows per (clique, root value). A
general junction tree (cliques ``C_1..C_T``, ``C_1`` the root, separator ``S_t`` between
``C_t`` and its parent) would need: the law of consistent clique tables -- the root table
``~ Mult(N, p_C1)`` and, for every other clique, each row ``m_Ct[s, :]`` (separator value ``s``)
``~ Mult(m_St[s], p(x_{Ct \\ St} | s))`` independently (given ``S_t`` the clique's other variables
are independent of the rest of the tree), with the hyper-Dirichlet prior (Dawid & Lauritzen
1993) making every factor Dirichlet-multinomial; pair moves within each clique table that keep
every separator table fixed (the row moves here generalise to moves within one separator value
only when the clique is a leaf; an inner clique feeds its children's separators too, which needs
a Markov basis of the fibre); and a refresh that removes units down the tree (root first, each
child clique's part given its separator value, without replacement) and adds them from the
hyper-Dirichlet predictive in the same order -- the same cancellation then leaves the noise
ratio alone. Not built here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.errors import PrivpostError
from privpost.inference._count_latent import CountLatent
from privpost.inference._count_table import log_eta, pair_sweep_c, residuals
from privpost.inference._margins_shift import (SHIFT_MAX_N, SHIFT_REFRESH_CAP,
                                               _draw_unit, _touch,
                                               coordinate_log_ratio, default_shifts,
                                               settle_coordinates, shift_moves, window_size)
from privpost.models._numeric import log_space_dirichlet

__all__ = ["MarginsLatent", "margins_iterations", "refresh_move", "default_refresh_mean",
           "default_moves", "noise_ratio", "data_margins"]

#: ``mu`` of :func:`default_refresh_mean` aims at a variance ``REFRESH_TARGET`` of the log noise
#: ratio of one refresh.
REFRESH_TARGET = 2.0

def noise_ratio(coords, N: int, M: int) -> float:
    """``lambda = v / (N / M)``: the noise variance of a margin cell (``v``, the mean over
    cells of ``1 / sum_releases 1 / var``; Laplace ``2 b^2``, Gaussian ``sigma^2``) against the
    mean count of a cell. ``lambda >> 1``: the noise dominates (the refresh, which draws units
    from the prior predictive, is the efficient move); ``lambda ~ 0.01-10``: the release and the
    counts both shape the margins (exact pair moves needed); ``lambda << 0.01``: the margins are
    pinned far below the Dirichlet spread of theta, whose exact draw carries the chain."""
    var = np.where(coords.l2, coords.scale ** 2, 2.0 * coords.scale ** 2)
    prec = np.asarray(coords.A.T @ (1.0 / var)).ravel()           # (M,) per margin cell
    v = float(np.mean(1.0 / np.maximum(prec, 1e-300)))
    return v / max(N / max(M, 1), 1e-300)


def default_moves(lam: float, M: int, N: int, mu: float) -> tuple[int, int]:
    """``(n_pairs, n_refresh)`` per iteration from :func:`noise_ratio` ``lam`` (and the
    refresh's mean unit count ``mu``): ``M`` pair moves where ``0.01 <= lam < 100``, else
    ``ceil(M / 8)``; refreshes: ``clip(ceil(N / mu), 2, min(64, MAX_REFRESH_UNITS / mu))``
    where the noise dominates (``lam >= 10``: about the whole data set refreshed per iteration,
    the count-level image of a record sweep), 16 where ``0.1 <= lam < 10``, else 4. Measured on
    seed 000's model (worst ESS per CPU-s of 4 x 2,000 draws after 500, n_pairs / n_refresh,
    a ``/tmp`` precursor of benchmarks/bench_nb_margins_moves.py at load 3-7, pairs chosen by
    unit, before the refresh was made incremental -- same draws, its CPU time then
    ``O(M + d)`` per move): n = 10^3, eps = 1 (lam = 15, mu = 20): (75, 32) 467, (75, 16) 361,
    (8, 16) 295, (75, 4) 128; n = 10^4, eps = 1 (1.5): (75, 16) 868, (75, 4) 813, (15, 16) 299,
    (0, 16) 22; n = 100, eps = 10 (1.5): (75, 64) 3,621, (15, 16) 4,248, (0, 16) 1,369;
    n = 100, eps = 0.1 (1.5e4, mu = 100): (0, 5) 4,086, (0, 16) 1,606; n = 10^6, eps = 10
    (1.5e-4): (8, 4) 23,621, (75, 4) 7,255; n = 10^8, eps = 1 (1.5e-4): (0, 4) 20,122,
    (75, 4) 4,073.

    Pairs are chosen uniformly (a uniform cell and a uniform partner in its row) where
    ``lam < 100`` and by unit above (``MarginsLatent.unit_frac``): measured (same script, load 6,
    after the in-place refresh), by unit / uniform: n = 10^4, eps = 1: 634 / 1,208; n = 10^3,
    eps = 1: 300 / 361; n = 10^6, eps = 1: 2,666 / 3,133; n = 100, eps = 10: 5,258 / 6,259;
    n = 100, eps = 1 (lam = 150, 10 pairs): 694 / 556 (the rows of small classes get few
    by-unit pairs, which is what slowed the middle of the range).
    """
    n_pairs = M if 0.01 <= lam < 100.0 else max(2, -(-M // 8))
    if lam >= 10.0:
        n_refresh = int(max(2, min(64, math.ceil(N / max(mu, 1.0)),
                                   math.ceil(MAX_REFRESH_UNITS / max(mu, 1.0)))))
    else:
        n_refresh = 16 if lam >= 0.1 else 4
    return n_pairs, n_refresh


#: Largest default mean unit count of a refresh: where the noise swamps the counts of a huge
#: data set the rule below would refresh ~N units per move (10^9 at a census); the cap keeps a
#: move below a millisecond (the run-until-converged budget then reports slow mixing).
MAX_REFRESH_MEAN = 1_000.0

#: Largest number of units the default refreshes of one iteration replace (``n_refresh * mu``),
#: ~10 ms of work.
MAX_REFRESH_UNITS = 20_000


def refresh_mean_capped(w, l2, per_unit: int, N: int) -> bool:
    """Whether :func:`default_refresh_mean` is held at :data:`MAX_REFRESH_MEAN` below its rule
    (noise large against a unit's effect on a data set larger than the cap): the refresh then
    moves the class counts in steps too small for the noise, and the joint table mixes better
    (review of 26 Nov: N = 10^7, Laplace b = 100 / 300, worst ESS per CPU-s 117 / 19 on the
    margins against 583 / 668 on the joint table)."""
    return N > MAX_REFRESH_MEAN and \
        default_refresh_mean(w, l2, per_unit, N, cap=math.inf) > MAX_REFRESH_MEAN


def default_refresh_mean(w, l2, per_unit: int, N: int, cap: float = MAX_REFRESH_MEAN) -> float:
    """Mean ``mu`` of the refreshed-unit count ``k`` (``k = min(N, 1 + Geometric(mean mu -
    1))``), fixed from public quantities (the noise scales; never the state).

    A unit touches ``per_unit`` released coordinates (one per feature and release); removing
    ``k`` units and adding ``k`` changes ``~2 k per_unit`` residuals by one, each changing
    ``log eta`` by ``~w`` (``l1``: ``w = 1/b``, variance ``w^2``) or ``~2 w r`` (``l2``, ``r ~
    sigma``: variance ``2 w``). So ``mu = REFRESH_TARGET / (2 per_unit h)``, ``h`` the mean
    per-coordinate variance, clipped to ``[1, min(N, MAX_REFRESH_MEAN)]``. ``w, l2`` (d,)."""
    w = np.asarray(w, dtype=np.float64)
    l2 = np.asarray(l2, dtype=bool)
    if w.size == 0 or N <= 0:
        return 1.0
    h = float(np.mean(np.where(l2, 2.0 * w, w * w)))
    mu = REFRESH_TARGET / (2.0 * max(per_unit, 1) * max(h, 1e-300))
    return float(min(max(mu, 1.0), max(N, 1), cap))


# ============================================================================================
# compiled pieces
# ============================================================================================

@njit(cache=True, nogil=True)
def _draw_pred(c, alpha, st, ln, rng):
    """Index ``j in [0, ln)`` with probability ``(alpha[st + j] + c[st + j]) / sum``."""
    tot = 0.0
    for j in range(ln):
        tot += alpha[st + j] + c[st + j]
    u = rng.random() * tot
    acc = 0.0
    for j in range(ln):
        acc += alpha[st + j] + c[st + j]
        if u < acc:
            return j
    return ln - 1


@njit(cache=True, nogil=True)
def refresh_move(k, c, n, N, class_alpha, feat_alpha, off, levels, dc, dn, mark_c, cells,
                 dr, mark_r, coords, cell_ptr, cell_coord, cell_coef, w, l2, r, rng, wrong):
    """One refresh move of ``k`` units (module docstring, step 2; MH with acceptance
    ``eta(s | T m') / eta(s | T m)``), in place: the ``k`` units are removed from ``c`` (M,)
    and ``n`` (I,) (classes ``∝ n``, levels ``∝ m``, one after the other without replacement)
    and ``k`` added from the collapsed Polya predictive; the noise ratio is computed on the
    released coordinates the changed cells feed only (``O(k K)``, not ``O(M)``), and a rejected
    proposal is undone from the net changes ``dc`` (M,), ``dn`` (I,). ``r`` (d,) residuals
    ``s - T c``, current on entry, updated on acceptance. Work (all zero / False on entry and on
    return): ``dc, mark_c, cells`` (M,), ``dn`` (I,), ``dr, mark_r, coords`` (d,). Returns 1 if
    accepted. ``wrong = 1`` (tests only) multiplies the ratio by ``DM(n') / DM(n)`` (the
    class-count term), a WRONG sampler."""
    if k <= 0:
        return 0
    I = n.shape[0]
    K = off.shape[0]
    n_cells = 0
    tot = N
    for t in range(k):
        i = _draw_unit(n, 0, I, tot, rng)
        for f in range(K):
            st = off[f] + i * levels[f]
            j = _draw_unit(c, st, levels[f], n[i], rng)
            c[st + j] -= 1.0
            n_cells = _touch(st + j, -1.0, dc, mark_c, cells, n_cells)
        n[i] -= 1.0
        dn[i] -= 1.0
        tot -= 1.0
    a_tot = 0.0
    for i in range(I):
        a_tot += class_alpha[i]
    for t in range(k):
        u = rng.random() * (a_tot + tot)
        acc = 0.0
        i = I - 1
        for ii in range(I):
            acc += class_alpha[ii] + n[ii]
            if u < acc:
                i = ii
                break
        for f in range(K):
            st = off[f] + i * levels[f]
            j = _draw_pred(c, feat_alpha, st, levels[f], rng)
            c[st + j] += 1.0
            n_cells = _touch(st + j, 1.0, dc, mark_c, cells, n_cells)
        n[i] += 1.0
        dn[i] += 1.0
        tot += 1.0
    # net change of the released coordinates, coordinate by coordinate
    la, n_co = coordinate_log_ratio(n_cells, cells, dc, cell_ptr, cell_coord, cell_coef, dr,
                                    mark_r, coords, r, w, l2)
    if wrong == 1:
        for i in range(I):
            if dn[i] != 0.0:
                la += (math.lgamma(class_alpha[i] + n[i]) - math.lgamma(n[i] + 1.0)
                       - math.lgamma(class_alpha[i] + n[i] - dn[i]) + math.lgamma(n[i] - dn[i]
                                                                                   + 1.0))
    ok = -rng.standard_exponential() < la
    settle_coordinates(ok, n_co, coords, r, dr, mark_r)
    for a in range(n_cells):
        j = cells[a]
        if not ok:
            c[j] -= dc[j]
        dc[j] = 0.0
        mark_c[j] = False
    for i in range(I):
        if not ok:
            n[i] -= dn[i]
        dn[i] = 0.0
    return 1 if ok else 0


@njit(cache=True, nogil=True)
def _dir_fill(alpha, c, st, ln, out, lout, rng):
    """``out[st:st+ln] ~ Dirichlet(alpha + c)`` on that slice; ``lout = log out``."""
    tot = 0.0
    for j in range(ln):
        x = rng.standard_gamma(alpha[st + j] + c[st + j])
        out[st + j] = x
        tot += x
    if not tot > 0.0:           # every gamma underflowed (tiny concentrations): in log space
        conc = np.empty(ln)
        for j in range(ln):
            conc[j] = alpha[st + j] + c[st + j]
        log_space_dirichlet(conc, out[st:st + ln], rng)
        tot = 1.0
    for j in range(ln):
        out[st + j] /= tot
        lout[st + j] = math.log(out[st + j]) if out[st + j] > 0.0 else -np.inf


@njit(cache=True, nogil=True)
def theta_draw(c, n, class_alpha, feat_alpha, off, levels, p, q, lq, lp_work, rng):
    """``p ~ Dir(class_alpha + n)`` (I,), every row ``q[off_f + i J_f : ...] ~ Dir(b + m)``
    (M,); ``lq = log q`` (the log cell probabilities of the uncollapsed pair moves)."""
    I = n.shape[0]
    _dir_fill(class_alpha, n, 0, I, p, lp_work, rng)
    for f in range(off.shape[0]):
        for i in range(I):
            _dir_fill(feat_alpha, c, off[f] + i * levels[f], levels[f], q, lq, rng)


@njit(cache=True, nogil=True)
def margins_iterations(n_iter, keep, c, n, N, class_alpha, feat_alpha, col_alpha, off, levels,
                       n_pairs, unit_frac, n_refresh, refresh_mean, eligible, el_pos, fen,
                       cell_grp,
                       grp_ptr, grp_cells, cell_ptr, cell_coord, cell_coef, s, w, l2, log_const,
                       r, b_idx, b_r, b_v, b_w, b_l2, dc, dn, mark_c, cells, dr, mark_r, coords,
                       p, q, lq, lp_work, counts, out_theta, out_log_eta, rng, wrong,
                       n_shift, adapting, sh_c, sh_n, sh_p, sh_F, sh_S, sh_uv, sh_uu, sh_v,
                       sh_vp, sh_z, iw_f, iw_i, iw_mean, iw_m2, iw_chol, sh_counts, sh_wrong,
                       sh_row_map):
    """``n_iter`` iterations of the margins chain (module docstring): ``n_pairs`` exact pair
    moves within rows (``pair_sweep_c``; collapsed on the rows whose ``col_alpha`` is the
    Dirichlet concentration, given ``q`` = ``exp(lq)`` where it is 0), ``n_refresh`` refresh
    moves of ``k = min(N, 1 + G)`` units (``G`` geometric, mean ``refresh_mean - 1``), then
    ``theta ~ p(theta | m)``.

    State (updated): ``c`` (M,) margins, ``n`` (I,) class counts, ``p`` (I,), ``q, lq`` (M,).
    With ``keep``, row ``t`` of ``out_theta`` (n_iter, I + M) gets ``[p, q]`` after iteration
    ``t`` and ``out_log_eta[t]`` the log noise density of the margins. ``counts`` (2,) int64:
    [refresh proposals, acceptances] (added to). After the theta draw, ``n_shift`` quantile-shift
    proposals of ``p`` (:func:`privpost.inference._margins_shift.shift_moves`; its work arrays
    ``sh_*``, its proposal ``iw_*`` adapted while ``adapting``, ``sh_counts`` its [proposals,
    acceptances] after the warm-up, ``sh_wrong`` its test-only wrong variants)."""
    I = n.shape[0]
    M = c.shape[0]
    g_p = 0.0
    if refresh_mean > 1.0:
        g_p = 1.0 / refresh_mean    # success probability of 1 + G (mean refresh_mean)
    for t in range(n_iter):
        if n_pairs > 0:
            pair_sweep_c(c, lq, col_alpha, n_pairs, unit_frac, eligible, el_pos, fen, cell_grp,
                         grp_ptr, grp_cells, cell_ptr, cell_coord, cell_coef, s, w, l2, r,
                         b_idx, b_r, b_v, b_w, b_l2, rng)
        else:
            residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
        for _ in range(n_refresh):
            k = 1.0
            if g_p > 0.0 and g_p < 1.0:
                u = 1.0 - rng.random()          # (0, 1]
                k = 1.0 + np.floor(math.log(u) / math.log1p(-g_p))
            if k > N:
                k = N
            counts[0] += 1
            counts[1] += refresh_move(int(k), c, n, N, class_alpha, feat_alpha, off, levels,
                                      dc, dn, mark_c, cells, dr, mark_r, coords, cell_ptr,
                                      cell_coord, cell_coef, w, l2, r, rng, wrong)
        theta_draw(c, n, class_alpha, feat_alpha, off, levels, p, q, lq, lp_work, rng)
        if n_shift > 0:                         # r = s - T c is current (step 1 set it)
            shift_moves(n_shift, adapting, c, n, N, p, q, class_alpha, off, levels, cell_ptr,
                        cell_coord, cell_coef, w, l2, r, sh_c, sh_n, sh_p, dc, mark_c, cells,
                        dr, mark_r, coords, sh_F, sh_S, sh_uv, sh_uu, sh_v, sh_vp, sh_z, iw_f,
                        iw_i, iw_mean, iw_m2, iw_chol, sh_counts, rng, sh_wrong,
                        sh_row_map)
        if keep:
            for i in range(I):
                out_theta[t, i] = p[i]
            for j in range(M):
                out_theta[t, I + j] = q[j]
            out_log_eta[t] = log_const + log_eta(r, w, l2)


# ============================================================================================
# starts
# ============================================================================================

def data_margins(s0, sd, l2, N: int, off, levels, rng):
    """A dispersed data-driven start ``(c (M,), n (I,))``: the first release re-noised (fresh
    noise of each coordinate's sd, Gaussian or Laplace by family), class counts the mean over
    features of its row sums projected on ``{n >= 0 integer, sum n = N}``, then each row
    ``(k, i)`` projected on ``{m >= 0 integer, sum m = n_i}``
    (:func:`privpost.inference._count_table.project_simplex_int`)."""
    from privpost.inference._count_table import project_simplex_int

    s0 = np.asarray(s0, dtype=np.float64)
    noise = np.where(l2, rng.standard_normal(s0.shape),
                     rng.laplace(0.0, 1.0, s0.shape) / math.sqrt(2.0))
    x = s0 + sd * noise
    K = len(levels)
    I = (x.shape[0]) // int(np.sum(levels))
    rows = np.stack([x[off[f]:off[f] + I * levels[f]].reshape(I, levels[f]).sum(1)
                     for f in range(K)])
    n = project_simplex_int(rows.mean(0), N)
    c = np.zeros(x.shape[0])
    for f in range(K):
        for i in range(I):
            st = off[f] + i * levels[f]
            c[st:st + levels[f]] = project_simplex_int(x[st:st + levels[f]], n[i])
    return c, n


# ============================================================================================
# the latent
# ============================================================================================

class MarginsLatent(CountLatent):
    """The margins latent (module docstring) of a naive-Bayes model.

    Parameters
    ----------
    names : list of str
        Posterior parameter names: ``"p"`` then one per feature table.
    shapes : dict
        ``p``: (I,), each feature table (I, J_k).
    class_alpha : (I,) float > 0
    feature_alpha : (M,) float > 0
        Row concentrations, flat ``off[k] + i J_k + j``.
    levels : (K,) ints >= 2
    N : int >= 0
        Public record count (conditioned on).
    coords : :class:`privpost.inference._count_table.Coordinates`
        The released coordinates (``T`` (d, M), ``s``, scales, kernel families).
    prior_sample : callable ``rng -> params``
    start_release : tuple ``(s0 (M,), sd (M,), l2 (M,))``
        The first release's values, noise sd and family (the data start).
    table : str
        The notes' description of the latent.
    n_pairs, n_refresh, refresh_mean : optional
        Pair moves, refresh moves per iteration and the refresh's mean unit count (defaults
        :func:`default_moves`, :func:`default_refresh_mean`; where the default shift is on and
        the noise ratio < 100, at most ``SHIFT_REFRESH_CAP`` refreshes).
    n_shift : int >= 0, optional
        Quantile-shift (non-centred) proposals of ``p`` per iteration
        (:mod:`privpost.inference._margins_shift`; default
        :func:`~privpost.inference._margins_shift.default_shifts`: on where the noise
        dominates and ``N <= SHIFT_MAX_N``). Refused above ``SHIFT_MAX_N`` (its cost per
        proposal grows like ``sqrt(N)``).
    """

    stat_names = ("log_eta",)

    def __init__(self, *, names, shapes, class_alpha, feature_alpha, levels, N, coords,
                 prior_sample, start_release, table, n_pairs=None, n_refresh=None,
                 refresh_mean=None, n_shift=None):
        from privpost.limits import check_latent

        self.names = list(names)
        self.shapes = {k: tuple(v) for k, v in shapes.items()}
        self.class_alpha = np.ascontiguousarray(class_alpha, dtype=np.float64)
        self.feature_alpha = np.ascontiguousarray(feature_alpha, dtype=np.float64)
        self.levels = np.ascontiguousarray(levels, dtype=np.int64)
        I, K = self.class_alpha.shape[0], self.levels.shape[0]
        M = int(I * self.levels.sum())
        self.I, self.K, self.M = I, K, M
        self.off = np.ascontiguousarray(
            np.concatenate([[0], np.cumsum(I * self.levels)[:-1]]), dtype=np.int64)
        if self.feature_alpha.shape != (M,) or not np.all(self.feature_alpha > 0) or \
                not np.all(self.class_alpha > 0) or np.any(self.levels < 2) or I < 2:
            raise PrivpostError("margins latent: class_alpha (I,) and feature_alpha (M,) must be "
                                "positive, every feature with >= 2 levels")
        if isinstance(N, bool) or int(N) != N or N < 0:
            raise PrivpostError(f"margins latent: N must be a non-negative integer, got {N!r}")
        self.N = int(N)
        self.coords = coords
        if coords.A.shape[1] != M:
            raise PrivpostError(f"margins latent: the release map must have {M} columns")
        check_latent("margins table", M, 1)
        self.prior_sample = prior_sample
        self.start_release = start_release
        self.table = table
        per_unit = int(np.diff(coords.A.indptr).sum()) // M * K if M else 0
        self.refresh_mean = (default_refresh_mean(coords.w, coords.l2, per_unit, self.N)
                             if refresh_mean is None else float(refresh_mean))
        #: the default refresh is held at its cap (:func:`refresh_mean_capped`)
        self.refresh_capped = refresh_mean is None and \
            refresh_mean_capped(coords.w, coords.l2, per_unit, self.N)
        if not 1.0 <= self.refresh_mean < math.inf:
            raise PrivpostError(f"margins latent: refresh_mean must be a finite number >= 1, "
                                f"got {refresh_mean!r}")
        self.noise_ratio = noise_ratio(coords, self.N, M)
        dp, dr = default_moves(self.noise_ratio, M, self.N, self.refresh_mean)
        self.n_pairs = dp if n_pairs is None else int(n_pairs)
        self.n_refresh = dr if n_refresh is None else int(n_refresh)
        if self.n_pairs < 0 or self.n_refresh < 0:
            raise PrivpostError("margins latent: n_pairs and n_refresh must be >= 0")
        if n_shift is None:
            self.n_shift = default_shifts(self.noise_ratio, self.N)
            if n_refresh is None and self.n_shift and self.noise_ratio < 100.0:
                self.n_refresh = min(self.n_refresh, SHIFT_REFRESH_CAP)
        else:
            if isinstance(n_shift, bool) or not isinstance(n_shift, (int, np.integer)) or \
                    not 0 <= n_shift <= 1000:
                raise PrivpostError(f"margins latent: n_shift must be an integer in [0, 1000], "
                                    f"got {n_shift!r}")
            if n_shift and self.N > SHIFT_MAX_N:
                raise PrivpostError(f"margins latent: n_shift > 0 needs N <= {SHIFT_MAX_N} "
                                    f"(its cost grows like sqrt(N)), got N = {self.N}")
            self.n_shift = int(n_shift)
        self.wrong = 0
        self.shift_wrong = 0
        #: how the rows follow the class counts in the quantile shift: 1 thinning / adding
        #: units (default), 0 their own quantile uniforms (``_margins_shift``)
        self.shift_row_map = 1
        # pairs: uniform over each row's cells where the pair moves carry the chain (every row
        # gets its share whatever its class's size), by unit where the noise dominates
        self.unit_frac = 0.0 if self.noise_ratio < 100.0 else 1.0
        # groups: the rows (k, i)
        A = coords.A
        self.cell_ptr = np.ascontiguousarray(A.indptr, dtype=np.int64)
        self.cell_coord = np.ascontiguousarray(A.indices, dtype=np.int64)
        self.cell_coef = np.ascontiguousarray(A.data, dtype=np.float64)
        gp = [0]
        grp = np.zeros(M, dtype=np.int64)
        g = 0
        for f in range(K):
            for i in range(I):
                st = int(self.off[f] + i * self.levels[f])
                grp[st:st + self.levels[f]] = g
                gp.append(st + int(self.levels[f]))
                g += 1
        self.cell_grp = grp
        self.grp_ptr = np.array(gp, dtype=np.int64)
        self.grp_cells = np.arange(M, dtype=np.int64)
        self.eligible = np.arange(M, dtype=np.int64)
        self.el_pos = np.arange(M, dtype=np.int64)
        self.buf = int(2 * np.diff(self.cell_ptr).max()) if M else 1
        # collapsed rows: every concentration of the row >= 1 (log-concave DM conditional)
        row_ok = np.array([bool(np.all(self.feature_alpha[self.grp_ptr[t]:self.grp_ptr[t + 1]]
                                       >= 1.0)) for t in range(len(gp) - 1)])
        self.col_alpha = np.where(row_ok[grp], self.feature_alpha, 0.0)
        self.collapsed_rows = int(row_ok.sum())

    # ------------------------------------------------------------------------------------
    def start(self, rng, start: str):
        """``(c (M,), n (I,))`` of one chain."""
        if start == "prior":
            params = self.prior_sample(rng)
            n = rng.multinomial(self.N, params["p"]).astype(np.float64)
            c = np.zeros(self.M)
            for f, nm in enumerate(self.names[1:]):
                qf = np.asarray(params[nm], dtype=np.float64)
                for i in range(self.I):
                    st = self.off[f] + i * self.levels[f]
                    c[st:st + self.levels[f]] = rng.multinomial(int(n[i]), qf[i] / qf[i].sum())
            return c, n
        s0, sd, l2 = self.start_release
        return data_margins(s0, sd, l2, self.N, self.off, self.levels, rng)

    def to_params(self, T):
        """Rows ``T`` (S, I + M) of ``[p, q]`` -> ``{name: (S, *shape)}``."""
        out = {self.names[0]: T[:, :self.I].copy()}
        for f, nm in enumerate(self.names[1:]):
            st = self.I + self.off[f]
            out[nm] = T[:, st:st + self.I * self.levels[f]].reshape(
                -1, self.I, int(self.levels[f])).copy()
        return out

    def chains(self, rngs, start: str) -> list:
        return [MarginsChain(self, rng, start) for rng in rngs]

    def extra_notes(self, results: list[dict]) -> list[str]:
        acc = [r["refresh_accept"] for r in results]
        coll = ("collapsed (q integrated out: Dirichlet-multinomial weights)"
                if self.collapsed_rows == self.I * self.K else
                f"collapsed on {self.collapsed_rows} of {self.I * self.K} rows (the others "
                "given q: a concentration < 1)")
        return [f"margins: {self.n_pairs} exact pair moves within rows {coll}, "
                f"{self.n_refresh} unit-refresh moves (k = min(N, 1 + Geometric), mean "
                f"{self.refresh_mean:.3g} units; MH on the noise ratio) and the exact theta draw "
                f"per iteration; refresh acceptance after warm-up "
                f"{min(acc):.2f}-{max(acc):.2f}"] + (
            [f"margins: {self.n_shift} quantile-shift (non-centred) proposals of p per "
             f"iteration, the margins following p through fixed uniforms (step size adapted "
             f"in the warm-up only); acceptance after warm-up "
             f"{min(r['shift_accept'] for r in results):.2f}-"
             f"{max(r['shift_accept'] for r in results):.2f}"] if self.n_shift else [])


class MarginsChain:
    """One resumable chain on a :class:`MarginsLatent` (the interface of
    :func:`privpost.inference._until.run_rounds`)."""

    def __init__(self, law: MarginsLatent, rng, start: str):
        self.law, self.rng = law, rng
        c, n = law.start(rng, start)
        self.c = np.ascontiguousarray(c, dtype=np.float64)
        self.n = np.ascontiguousarray(n, dtype=np.float64)
        M, I = law.M, law.I
        d = law.coords.s.shape[0]
        self.r = np.zeros(d)
        b = max(law.buf, 1)
        self.b_idx = np.zeros(b, dtype=np.int64)
        self.b_r, self.b_v, self.b_w = np.zeros(b), np.zeros(b), np.zeros(b)
        self.b_l2 = np.zeros(b, dtype=np.bool_)
        self.fen = np.zeros(M + 1)
        self.dc, self.dn, self.dr = np.zeros(M), np.zeros(I), np.zeros(d)
        self.mark_c, self.mark_r = np.zeros(M, dtype=np.bool_), np.zeros(d, dtype=np.bool_)
        self.cells, self.coords = np.zeros(M, dtype=np.int64), np.zeros(d, dtype=np.int64)
        self.p, self.lp_work = np.zeros(I), np.zeros(I)
        self.q, self.lq = np.zeros(M), np.zeros(M)
        # theta given the start (the uncollapsed rows' pair moves read lq)
        theta_draw(self.c, self.n, law.class_alpha, law.feature_alpha, law.off, law.levels, self.p,
            self.q, self.lq, self.lp_work, rng)
        self.counts = np.zeros(2, dtype=np.int64)
        # the quantile shift's work and adapted proposal (the compiled _IWState's start)
        dim = I - 1 if law.n_shift else 0
        nw = window_size(law.N) if law.n_shift else 1
        D = (I - 1) + int(np.sum(I * (law.levels - 1))) if law.n_shift else 0
        self.sh_c, self.sh_n, self.sh_p = np.zeros(M), np.zeros(I), np.zeros(I)
        self.sh_F, self.sh_S = np.zeros(nw), np.zeros(nw)
        self.sh_uv, self.sh_uu = np.zeros(D), np.zeros(D, dtype=np.int64)
        self.sh_v, self.sh_vp, self.sh_z = np.zeros(dim), np.zeros(dim), np.zeros(dim)
        self.iw_f = np.array([math.log(0.1), 0.44 if dim == 1 else 0.3])
        self.iw_i = np.zeros(4, dtype=np.int64)
        self.iw_mean, self.iw_m2, self.iw_chol = np.zeros(dim), np.zeros((dim, dim)), np.eye(dim)
        self.sh_counts = np.zeros(2, dtype=np.int64)
        self.warm_counts = None
        self.done = 0
        self.n_stored = 0
        self._blocks = {"theta": [], "log_eta": []}

    def run(self, k: int, keep: bool, progress=None) -> None:
        k = int(k)
        if k <= 0:
            return
        law, co = self.law, self.law.coords
        if keep and self.warm_counts is None:
            self.warm_counts = self.counts.copy()
        out_t = np.empty((k if keep else 0, law.I + law.M))
        out_le = np.empty(k if keep else 0)
        margins_iterations(
            k, keep, self.c, self.n, float(law.N), law.class_alpha, law.feature_alpha,
            law.col_alpha, law.off, law.levels, law.n_pairs, law.unit_frac, law.n_refresh,
            law.refresh_mean,
            law.eligible, law.el_pos, self.fen, law.cell_grp, law.grp_ptr, law.grp_cells,
            law.cell_ptr, law.cell_coord, law.cell_coef, co.s, co.w, co.l2, co.log_const,
            self.r, self.b_idx, self.b_r, self.b_v, self.b_w, self.b_l2, self.dc, self.dn,
            self.mark_c, self.cells, self.dr, self.mark_r, self.coords, self.p, self.q, self.lq,
            self.lp_work, self.counts, out_t, out_le, self.rng, law.wrong, law.n_shift,
            not keep, self.sh_c, self.sh_n, self.sh_p, self.sh_F, self.sh_S, self.sh_uv,
            self.sh_uu, self.sh_v, self.sh_vp, self.sh_z, self.iw_f, self.iw_i, self.iw_mean,
            self.iw_m2, self.iw_chol, self.sh_counts, law.shift_wrong, law.shift_row_map)
        self.done += k
        if progress is not None:
            progress(self.done - 1)
        if keep:
            self._blocks["theta"].append(out_t)
            self._blocks["log_eta"].append(out_le)
            self.n_stored += k

    def result(self) -> dict:
        law = self.law
        T = np.concatenate(self._blocks["theta"]) if self._blocks["theta"] else \
            np.empty((0, law.I + law.M))
        le = np.concatenate(self._blocks["log_eta"]) if self._blocks["log_eta"] else np.empty(0)
        if len(self._blocks["theta"]) > 1:
            self._blocks = {"theta": [T], "log_eta": [le]}
        res = law.to_params(T)
        res["log_eta"] = le
        res["n_stored"] = self.n_stored
        base = self.warm_counts if self.warm_counts is not None else self.counts
        prop = int(self.counts[0] - base[0])
        res["refresh_accept"] = (int(self.counts[1] - base[1]) / prop) if prop else math.nan
        res["shift_accept"] = (int(self.sh_counts[1]) / int(self.sh_counts[0])
                               if self.sh_counts[0] else math.nan)
        return res
