"""The non-centred (quantile-shift) theta move of the naive-Bayes margins latent
(:mod:`privpost.inference._count_margins`; issue 21 items 1 and 3).

Why a non-centred move
----------------------
The margins chain moves the class counts ``n`` with theta integrated out (the unit refresh) and
then draws ``theta | m`` exactly. Where the noise is large against ``sqrt(N)`` the margins are
almost determined by theta (``sd(n_i | p) ~ sqrt(N p_i)``) while the release hardly constrains
them, so the centred pair ``(m | s) -> (theta | m)`` walks: each step moves ``p`` by
``O(1 / sqrt(N))``. Moving theta and the table together, the table following theta through
fixed uniforms, lets theta take prior-sized steps whose acceptance is set by the noise ratio.

The parametrisation
-------------------
Write the law of the margins given theta (``n ~ Mult(N, p)``, ``m[k, i, :] ~ Mult(n_i,
q_k[i])``) as a deterministic map of theta and uniforms: a multinomial ``x ~ Mult(n, pi)`` over
``L`` categories is the sequence of binomials ``x_l ~ Bin(n - x_1 - ... - x_{l-1}, pi_l /
(pi_l + ... + pi_L))``, ``l < L`` (the last category takes the rest), and each binomial is
its quantile at a uniform: ``x_l = G^{-1}(u_l) = min{x : G(x) > u_l}``, ``G`` its CDF. So with
``U`` uniform on ``[0, 1)^D`` (``D = (I - 1) + sum_k I (J_k - 1)`` uniforms: the class
counts', then every row's), independent of theta, ``m = g(theta, U)`` has exactly the law
``P(m | theta)``. The extended target

    pi~(theta, u) ∝ p(theta) eta(s | T g(theta, u))          (u's law: uniform, free of theta)

therefore has ``(theta, g(theta, u))`` distributed as the chain's target ``pi(theta, m | s)``.
One move (:func:`shift_moves`) is two steps, each leaving ``pi~`` invariant:

1. **u given (theta, m)** (a Gibbs step): ``eta`` depends on ``u`` only through ``m``, so the
   conditional of ``u`` is uniform on the preimage ``{u : g(theta, u) = m}``. For a discrete
   table this is a product of intervals, one per binomial: ``x_l = G^{-1}(u_l)`` exactly when
   ``G(x_l - 1) <= u_l < G(x_l)``. Drawing ``u_l`` uniformly there (the preimage of the
   *current* count under the *current* theta, the sequence's earlier counts fixing ``n -
   x_1 - ...``) is an exact draw of the conditional: this is what makes the move exact on a
   discrete table (the map ``u -> m`` is many-to-one; theta is moved on the continuous
   ``(theta, u)`` space, where a symmetric proposal has a plain density ratio).
2. **theta given u** (MH): ``p`` in additive log-ratio coordinates ``v_i = log(p_i / p_I)``
   (``i < I``), where the Dirichlet(a) prior has density ``∝ prod_i p_i^{a_i}`` (the simplex
   density times the Jacobian ``prod_i p_i``); proposal ``v' = v + e^{s} L z`` (``z ~ N(0,
   I_{I-1})``, ``s, L`` adapted in the warm-up only by
   :func:`privpost.inference._damcmc_fast._iw_adapt`; symmetric, so the proposal ratio is 1);
   ``q`` held; ``m' = g(theta', u)``: ``n'`` from the class uniforms, then every row ``m'[k, i,
   :]`` from its uniforms given ``n'_i`` and ``q_k[i]`` (a row whose class count did not change
   keeps its counts). Accepted with probability

       min(1, prod_i (p'_i / p_i)^{a_i} * eta(s | T m') / eta(s | T m)),

   prior ratio times noise ratio; ``u``'s law does not involve theta, so no table term appears.
   The log ratio is summed term by term -- ``a_i (log p'_i - log p_i)`` and, per released
   coordinate a changed cell feeds, the change of its kernel (``w (|z'| - |z|)`` or ``w (z' -
   z)(z' + z)``) -- never as a difference of two full sums, which cancels catastrophically for
   a release near ``10^8`` (the D3 defect of the margins' history).

Rows by thinning (the default, ``row_map = 1``)
---------------------------------------------
The rows need not follow ``n'`` through uniforms of their own: given ``q``, a row ``x ~
Mult(n_i, q_k[i])`` is the count of ``n_i`` i.i.d. ``Cat(q_k[i])`` units, and the kernel
``R_{n -> n'}`` that removes ``n - n'`` of its units uniformly at random without replacement
(``n' < n``; multivariate hypergeometric) or adds ``n' - n`` units drawn from ``Cat(q_k[i])``
(``n' > n``) satisfies ``Mult(x | n, q) R_{n -> n'}(x, x') = Mult(x' | n', q) R_{n' -> n}(x',
x)`` (both sides are the law of the counts of the first ``min(n, n')`` and of all ``max(n,
n')`` of i.i.d. units, in one order or the other). So on the space ``(theta, u_class,
rows)`` -- rows ``~ prod_{k,i} Mult(n_i(p, u_class), q_k[i])`` -- proposing ``p'`` as above,
``n' = g(p', u_class)`` and every row from ``R_{n_i -> n'_i}`` has MH ratio ``[p(p') prod
Mult(x' | n', q) eta'] R_{n' -> n}(x', x) / ([p(p) prod Mult(x | n, q) eta] R_{n -> n'}(x,
x'))`` = the same ``prior ratio x noise ratio``: the row terms cancel by the identity. The rows
then cost ``O(|n' - n| K)`` unit draws instead of ``2 K`` binomial windows per class, and only
``I - 1`` uniforms are drawn in step 1. ``row_map = 0`` keeps the quantile rows (both are
tested against enumeration).

After an accepted or rejected proposal the uniforms are still consistent with the state, so
``n_shift`` proposals reuse the ``u`` of step 1. The last of the chain's steps (the exact theta
draw) leaves theta distributed given ``m``; this move leaves ``pi(theta, m | s)`` invariant, so it
is appended to the margins iteration after that draw.

Binomial quantiles in floating point
------------------------------------
:func:`binom_window` tabulates a binomial's CDF ``F`` (summed from the lower end) and survival
``S = 1 - F`` (summed from the upper end, so that both tails keep their relative accuracy) on the
window ``mu +- t``, ``t = L/3 + sqrt(L^2/9 + 2 L sigma^2)``, ``L = 47``: by Bernstein's inequality
``P(|X - mu| >= t) <= 2 exp(-t^2 / (2 (sigma^2 + t/3))) = 2 e^{-47} < 10^{-20}``; the pmf on the
window comes from the ratio recurrence started at the mode, normalised by its sum. The law the
move uses is thus the binomial restricted to that window (total variation ``< 10^-20`` from the
exact law, far below what double precision resolves in ``F``), and a state outside a window
(probability ``< 10^-20``) skips the move. A uniform is held as ``u`` on ``[0, 1/2)`` and as
``v = 1 - u`` on ``(0, 1/2]`` (inverted with ``F`` and ``S`` respectively), so quantiles deep in
either tail are resolved. Cost per binomial: the window, ``O(sigma)`` (a few multiplications
per entry); per proposal ``I - 1`` class windows plus ``O(|n' - n| K)`` unit draws (thinned
rows; ``2 K`` row windows per moved class with quantile rows). The move is offered only where
``N <= SHIFT_MAX_N`` (so ``sigma <= sqrt(N) / 2`` stays bounded and so does the cost per move,
whatever ``N``), and by default only where the noise dominates (:func:`default_shifts`): at
large ``N`` the noise is small against ``sqrt(N)`` unless the release's scale is huge, where
``latent="auto"`` takes the joint table.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.inference._damcmc_fast import _iw_adapt, _iw_propose
from privpost.inference._kernels import noise_change

__all__ = ["coordinate_log_ratio", "settle_coordinates", "binom_window", "window_size",
           "draw_uniform", "invert_uniform", "shift_moves",
           "default_shifts", "SHIFT_REFRESH_CAP", "SHIFT_MAX_N", "SHIFT_MIN_RATIO", "BERNSTEIN_L"]

#: ``-log`` of half the omitted mass of a binomial window (module docstring).
BERNSTEIN_L = 47.0

#: Largest public record count at which the move is offered (window <= ~3,100 entries).
SHIFT_MAX_N = 100_000

#: Smallest noise ratio (``_count_margins.noise_ratio``) at which the move is on by default.
#: Measured on seed 000's model (``bench_counts.joint_problem("nb", n, 1)``, Laplace eps = 1,
#: 4 chains x 2,000 draws after 500, worst ESS per CPU-s, off / 4 proposals per iteration,
#: load ~2-7): rows by quantiles: n = 100 (lam = 150) 832 / 977 (worst ESS 598 / 1,207),
#: n = 300 (lam = 50) 350 / 571, n = 10^3 (lam = 15) 417 / 340, n = 10^4 (lam = 1.5) 1,286 /
#: 435; rows by thinning (the default): n = 100 823 / 1,215, n = 10^3 423 / 466 (worst ESS of
#: p 2,218 / 2,719), n = 10^4 1,317 / 1,028.
SHIFT_MIN_RATIO = 10.0


def window_size(N: int) -> int:
    """Entries of the largest binomial window at ``n <= N`` (``sigma^2 <= N / 4``)."""
    L = BERNSTEIN_L
    t = L / 3.0 + math.sqrt(L * L / 9.0 + 2.0 * L * max(N, 0) / 4.0)
    return int(min(N, 2 * math.ceil(t) + 2)) + 2


#: Refresh moves per iteration at most where the shift is on and ``lam < 100`` (the shift
#: moves the class counts the refresh walked; ``MarginsLatent`` applies it to its default).
SHIFT_REFRESH_CAP = 16


def default_shifts(lam: float, N: int) -> int:
    """Quantile-shift proposals per iteration where the noise dominates (noise ratio ``lam >=
    SHIFT_MIN_RATIO``) and ``N <= SHIFT_MAX_N``: 8 below ``lam = 100``, 4 above; else 0.
    Measured (``bench_nb_margins_moves.py``, 4 x 2,000 after 500, load ~11, worst ESS per
    CPU-s; (n_refresh, n_shift)): n = 10^3 (lam = 15): (51, 4) 465, (16, 4) 645, (16, 8) 786,
    (8, 8) 797; n = 300 (lam = 50): (16, 4) 634, (16, 8) 821; n = 100 (lam = 150): (6, 4)
    1,219, (6, 8) 1,030, (16, 8) 1,137."""
    if not (lam >= SHIFT_MIN_RATIO and 0 < N <= SHIFT_MAX_N):
        return 0
    return 8 if lam < 100.0 else 4


@njit(cache=True, nogil=True)
def _draw_unit(c, st, ln, tot, rng):
    """Index ``j in [0, ln)`` of a unit uniform among the ``tot`` units of ``c[st:st + ln]``
    (integer counts stored as float64; ``tot`` their sum, ``> 0``)."""
    u = np.floor(rng.random() * tot)
    acc = 0.0
    last = ln - 1
    for j in range(ln):
        if c[st + j] > 0.0:
            last = j
            acc += c[st + j]
            if u < acc:
                return j
    return last


@njit(cache=True, nogil=True)
def _touch(j, delta, d_arr, mark, lst, nl):
    """``d_arr[j] += delta``; ``j`` appended to ``lst`` (marked) the first time; returns the
    list's new length."""
    if not mark[j]:
        mark[j] = True
        lst[nl] = j
        nl += 1
    d_arr[j] += delta
    return nl


@njit(cache=True, nogil=True)
def _draw_cat(prob, st, ln, rng):
    """Index ``j in [0, ln)`` with probability ``prob[st + j] / sum``."""
    tot = 0.0
    for j in range(ln):
        tot += prob[st + j]
    u = rng.random() * tot
    acc = 0.0
    for j in range(ln):
        acc += prob[st + j]
        if u < acc:
            return j
    return ln - 1


@njit(cache=True, nogil=True)
def _draw_level(c, st, ln, rng):
    """A uniform non-empty level of ``c[st:st + ln]`` (the WRONG thinning of the tests)."""
    k = 0
    for j in range(ln):
        if c[st + j] > 0.0:
            k += 1
    t = int(rng.random() * k)
    for j in range(ln):
        if c[st + j] > 0.0:
            if t == 0:
                return j
            t -= 1
    return ln - 1


@njit(cache=True, nogil=True)
def binom_window(n, pi, F, S):
    """Tabulate ``Bin(n, pi)`` on its window ``[lo, hi]`` (module docstring): ``F[t] = P(X <=
    lo + t)``, ``S[t] = P(X > lo + t)`` for ``t = 0..hi - lo`` (``F, S`` of length ``>=
    window_size(n)``). ``n >= 0`` integer (float), ``pi`` in ``[0, 1]``. Returns ``lo, hi``."""
    if n <= 0.0 or pi <= 0.0:
        F[0] = 1.0
        S[0] = 0.0
        return 0, 0
    if pi >= 1.0:
        F[0] = 1.0
        S[0] = 0.0
        nn = int(n)
        return nn, nn
    L = BERNSTEIN_L
    var = n * pi * (1.0 - pi)
    t = L / 3.0 + math.sqrt(L * L / 9.0 + 2.0 * L * var)
    mu = n * pi
    lo = int(max(0.0, math.floor(mu - t)))
    hi = int(min(n, math.ceil(mu + t)))
    mode = int(math.floor((n + 1.0) * pi))
    if mode > hi:
        mode = hi
    if mode < lo:
        mode = lo
    odds = pi / (1.0 - pi)
    inv_odds = (1.0 - pi) / pi
    w = hi - lo
    F[mode - lo] = 1.0
    for x in range(mode, hi):              # pmf(x + 1) = pmf(x) (n - x) / (x + 1) odds
        F[x + 1 - lo] = F[x - lo] * ((n - x) * odds / (x + 1.0))
    for x in range(mode, lo, -1):          # pmf(x - 1) = pmf(x) x / (n - x + 1) / odds
        F[x - 1 - lo] = F[x - lo] * (x * inv_odds / (n - x + 1.0))
    acc = 0.0
    for a in range(w, -1, -1):             # S from the upper end
        S[a] = acc
        acc += F[a]
    inv = 1.0 / acc
    acc = 0.0
    for a in range(w + 1):                 # F from the lower end
        acc += F[a]
        F[a] = acc * inv
        S[a] = S[a] * inv
    return lo, hi


@njit(cache=True, nogil=True)
def draw_uniform(x, lo, hi, F, S, rng, wrong):
    """A uniform of the preimage of count ``x`` under the tabulated window (``binom_window``):
    ``(value, upper)`` -- ``u = value`` in ``[F(x-1), min(F(x), 1/2))`` (``upper = 0``) or ``v
    = 1 - u = value`` in ``(S(x), min(S(x-1), 1/2)]`` (``upper = 1``), the two pieces chosen
    by their lengths. ``upper = -1``: the preimage is empty (``x`` off the window). ``wrong =
    1`` (tests only): the preimage of ``x - 1`` instead (an off-by-one u refresh)."""
    if wrong == 1:
        x = x - 1
    if x < lo or x > hi:
        return 0.0, -1
    a = x - lo
    f0 = F[a - 1] if a > 0 else 0.0
    s0 = S[a - 1] if a > 0 else 1.0
    f1 = F[a]
    s1 = S[a]
    l1 = min(f1, 0.5) - f0
    if l1 < 0.0:
        l1 = 0.0
    l2 = min(s0, 0.5) - s1
    if l2 < 0.0:
        l2 = 0.0
    tot = l1 + l2
    if not tot > 0.0:
        return 0.0, -1
    e = rng.random() * tot
    if e < l1:
        u = f0 + e
        if u >= min(f1, 0.5):
            u = f0
        return u, 0
    vv = min(s0, 0.5) - (e - l1)
    if vv <= s1:
        vv = min(s0, 0.5)
    return vv, 1


@njit(cache=True, nogil=True)
def invert_uniform(value, upper, lo, hi, F, S):
    """The count ``x`` of a held uniform (``draw_uniform``'s ``(value, upper)``) under the
    tabulated window: the first ``x`` with ``F(x) > u`` (``upper = 0``) or with ``S(x) < v``
    (``upper = 1``); binary search, ``O(log(hi - lo))``."""
    w = hi - lo
    a, b = 0, w
    if upper == 0:
        while a < b:
            mid = (a + b) // 2
            if F[mid] > value:
                b = mid
            else:
                a = mid + 1
    else:
        while a < b:
            mid = (a + b) // 2
            if S[mid] < value:
                b = mid
            else:
                a = mid + 1
    return lo + a


@njit(cache=True, nogil=True)
def _group_mass(prob, st, ln):
    """``sum(prob[st:st + ln])`` in cell order (the first conditional's denominator)."""
    rem_p = 0.0
    for j in range(ln):
        rem_p += prob[st + j]
    return rem_p


@njit(cache=True, nogil=True)
def _step_window(rem_n, pj, rem_p, F, S):
    """The window ``(lo, hi)`` of one step of the sequential binomials, ``Bin(rem_n, pj /
    rem_p)`` (probability 1 where ``rem_p`` is 0 or the ratio rounds above 1), tabulated into
    ``F, S`` by :func:`binom_window`: shared by :func:`_group_uniforms` and its inverse
    :func:`_group_invert`, which must see the same windows."""
    cond = pj / rem_p if rem_p > 0.0 else 1.0
    if cond > 1.0:
        cond = 1.0
    return binom_window(rem_n, cond, F, S)


@njit(cache=True, nogil=True)
def _group_uniforms(x, st, ln, tot, prob, F, S, uv, uu, q0, rng, wrong):
    """The ``ln - 1`` uniforms of ``x[st:st + ln]`` (a multinomial of ``tot`` with cell
    probabilities ``prob[st:st + ln]``, sequential binomials in cell order) into ``uv, uu``
    from index ``q0``. Returns False if a count is off its window."""
    rem_n = tot
    rem_p = _group_mass(prob, st, ln)
    for j in range(ln - 1):
        pj = prob[st + j]
        lo, hi = _step_window(rem_n, pj, rem_p, F, S)
        val, up = draw_uniform(int(x[st + j]), lo, hi, F, S, rng, wrong)
        if up < 0:
            return False
        uv[q0 + j] = val
        uu[q0 + j] = up
        rem_n -= x[st + j]
        rem_p -= pj
    return True


@njit(cache=True, nogil=True)
def _group_invert(out, st, ln, tot, prob, F, S, uv, uu, q0):
    """``out[st:st + ln]`` = the multinomial of ``tot`` at the held uniforms ``uv, uu`` from
    ``q0`` (``_group_uniforms``' inverse under cell probabilities ``prob[st:st + ln]``)."""
    rem_n = tot
    rem_p = _group_mass(prob, st, ln)
    for j in range(ln - 1):
        pj = prob[st + j]
        lo, hi = _step_window(rem_n, pj, rem_p, F, S)
        xj = float(invert_uniform(uv[q0 + j], uu[q0 + j], lo, hi, F, S))
        if xj > rem_n:
            xj = rem_n
        out[st + j] = xj
        rem_n -= xj
        rem_p -= pj
    out[st + ln - 1] = rem_n


@njit(cache=True, nogil=True)
def coordinate_log_ratio(n_cells, cells, dc, cell_ptr, cell_coord, cell_coef, dr, mark_r, coords,
                         r, w, l2):
    """``log eta(s | T (c + dc)) - log eta(s | T c)`` summed coordinate by coordinate over the
    released coordinates the changed cells ``cells[:n_cells]`` feed (never a difference of two
    full sums): ``dr`` gets ``T dc`` on those coordinates, listed in ``coords`` and marked in
    ``mark_r`` (the caller applies ``r -= dr`` on acceptance and clears them). ``r`` (d,) is
    ``s - T c``. Returns ``(log ratio, number of coordinates)``."""
    n_co = 0
    for a in range(n_cells):
        j = cells[a]
        if dc[j] != 0.0:
            for t in range(cell_ptr[j], cell_ptr[j + 1]):
                m_ = cell_coord[t]
                if not mark_r[m_]:
                    mark_r[m_] = True
                    coords[n_co] = m_
                    n_co += 1
                dr[m_] += cell_coef[t] * dc[j]
    la = 0.0
    for a in range(n_co):
        m_ = coords[a]
        la += noise_change(r[m_], dr[m_], w[m_], l2[m_])    # from the residual: exact at any |r|
    return la, n_co


@njit(cache=True, nogil=True)
def settle_coordinates(ok, n_co, coords, r, dr, mark_r):
    """After :func:`coordinate_log_ratio`'s proposal is decided: ``r -= dr`` on its ``n_co``
    coordinates if accepted (``ok``), and ``dr``, ``mark_r`` cleared there either way."""
    for a in range(n_co):
        m_ = coords[a]
        if ok:
            r[m_] -= dr[m_]
        dr[m_] = 0.0
        mark_r[m_] = False


@njit(cache=True, nogil=True)
def shift_moves(n_shift, adapting, c, n, N, p, q, class_alpha, off, levels, cell_ptr,
                cell_coord, cell_coef, w, l2, r, c_new, n_new, p_new, dc, mark_c, cells, dr,
                mark_r, coords, F, S, uv, uu, v, vp, z, iw_f, iw_i, mean, m2, chol, counts, rng,
                wrong, row_map):
    """``n_shift`` quantile-shift proposals of ``p`` (module docstring), in place on the
    margins ``c`` (M,), class counts ``n`` (I,), ``p`` (I,) and the residuals ``r = s - T c``
    (d,; current on entry, kept current). ``q`` (M,) is held. Work: ``c_new`` (M,), ``n_new,
    p_new`` (I,), ``dc, mark_c, cells`` (M,; zero / False on entry and return), ``dr, mark_r,
    coords`` (d,; likewise), ``F, S`` (>= ``window_size(N)``), ``uv, uu`` (D,), ``v, vp, z``
    (I - 1,); ``iw_f, iw_i, mean, m2, chol``: the proposal, adapted while ``adapting``.
    ``counts`` (2,) int64: [proposals, acceptances] after the warm-up (added to). ``wrong``
    (tests only): 1 the u refresh off by one, 2 the alr Jacobian left out of the prior ratio
    (the simplex density ``prod p^(a - 1)`` used as the density of ``v``), 3 (``row_map = 1``)
    the thinning removes a uniform non-empty LEVEL instead of a uniform unit. ``row_map``: 0
    the rows follow ``n'`` through their own quantile uniforms; 1 by thinning / adding (module
    docstring, "Rows by thinning"). Returns the number of accepted proposals."""
    I = n.shape[0]
    K = off.shape[0]
    dim = I - 1
    if n_shift <= 0 or dim <= 0:
        return 0
    for i in range(I):
        if not p[i] > 0.0:
            return 0
    jac = 0.0 if wrong == 2 else 1.0
    # 1. the uniforms given (theta, m): class counts, then (quantile rows) every row
    if not _group_uniforms(n, 0, I, N, p, F, S, uv, uu, 0, rng, 1 if wrong == 1 else 0):
        return 0
    q0 = I - 1
    if row_map == 0:
        for f in range(K):
            for i in range(I):
                st = off[f] + i * levels[f]
                if not _group_uniforms(c, st, levels[f], n[i], q, F, S, uv, uu, q0, rng,
                                       1 if wrong == 1 else 0):
                    return 0
                q0 += levels[f] - 1
    lpI = math.log(p[I - 1])
    for i in range(dim):
        v[i] = math.log(p[i]) - lpI
    moved = 0
    for _ in range(n_shift):
        # 2. theta' with u held
        _iw_propose(dim, v, iw_f, chol, z, vp, rng)
        log_u = math.log1p(-rng.random())
        mx = 0.0
        for a in range(dim):
            if vp[a] > mx:
                mx = vp[a]
        tot = math.exp(-mx)
        for a in range(dim):
            tot += math.exp(vp[a] - mx)
        lse = mx + math.log(tot)
        la = 0.0
        okp = True
        for i in range(I):
            lpn = (vp[i] if i < dim else 0.0) - lse
            p_new[i] = math.exp(lpn)
            if not p_new[i] > 0.0:
                okp = False
            la += (class_alpha[i] - 1.0 + jac) * (lpn - math.log(p[i]))
        alpha_acc = 0.0
        if okp:
            # the table at (theta', u): class counts, then the rows whose class count moved
            _group_invert(n_new, 0, I, N, p_new, F, S, uv, uu, 0)
            n_cells = 0
            q0 = I - 1
            for f in range(K):
                for i in range(I):
                    st = off[f] + i * levels[f]
                    ln = levels[f]
                    if row_map == 1:
                        # thin / add in place (undone from dc on rejection)
                        delta = int(n_new[i] - n[i])
                        tot_i = n[i]
                        for _t in range(-delta):
                            if wrong == 3:
                                j = _draw_level(c, st, ln, rng)
                            else:
                                j = _draw_unit(c, st, ln, tot_i, rng)
                            c[st + j] -= 1.0
                            n_cells = _touch(st + j, -1.0, dc, mark_c, cells, n_cells)
                            tot_i -= 1.0
                        for _t in range(delta):
                            j = _draw_cat(q, st, ln, rng)
                            c[st + j] += 1.0
                            n_cells = _touch(st + j, 1.0, dc, mark_c, cells, n_cells)
                    elif n_new[i] != n[i]:
                        _group_invert(c_new, st, ln, n_new[i], q, F, S, uv, uu, q0)
                        for j in range(ln):
                            dj = c_new[st + j] - c[st + j]
                            if dj != 0.0:
                                if not mark_c[st + j]:
                                    mark_c[st + j] = True
                                    cells[n_cells] = st + j
                                    n_cells += 1
                                dc[st + j] = dj
                    q0 += ln - 1
            d_la, n_co = coordinate_log_ratio(n_cells, cells, dc, cell_ptr, cell_coord,
                                              cell_coef, dr, mark_r, coords, r, w, l2)
            la += d_la
            if la != la:
                la = -np.inf
            alpha_acc = 1.0 if la >= 0.0 else math.exp(la)
            ok = log_u < la
            settle_coordinates(ok, n_co, coords, r, dr, mark_r)
            for a in range(n_cells):
                j = cells[a]
                if row_map == 1:
                    if not ok:
                        c[j] -= dc[j]
                elif ok:
                    c[j] += dc[j]
                dc[j] = 0.0
                mark_c[j] = False
            if ok:
                for i in range(I):
                    n[i] = n_new[i]
                    p[i] = p_new[i]
                for a in range(dim):
                    v[a] = vp[a]
                moved += 1
                if not adapting:
                    counts[1] += 1
        if adapting:
            _iw_adapt(v, alpha_acc, iw_f, iw_i, mean, m2, chol)
        else:
            counts[0] += 1
    return moved
