"""The exact one-dimensional move of units between two cells of a count table (issue 21; DESIGN
§10; COUNTS.md piece 1).

Moving ``k`` units from cell ``j`` to cell ``i`` of one Multinomial group (``c_i -> c_i + k``,
``c_j -> c_j - k``, every other cell fixed) has the full conditional

    log f(k) = k (log p_i - log p_j) - lgamma(c_i + k + 1) - lgamma(c_j - k + 1)
               + sum_m log eta_m(r_m - k v_m),                    k in [-c_i, c_j]

where ``r = s - A c`` are the current residuals of the released coordinates the two cells touch
and ``v_m = A[m, i] - A[m, j]``. The multinomial coefficient gives the two ``lgamma`` terms, the
cell probabilities the linear term, the mechanism the rest, with its kernel family (the record
path's :mod:`privpost.inference._kernels`, weights from ``weights_for``):

* ``"l1"`` (Laplace scale ``b``, discrete Laplace parameter ``t``): ``log eta(z) = -w |z|``,
  ``w = 1/scale``;
* ``"l2"`` (Gaussian sd ``sigma``, discrete Gaussian ``sigma``): ``log eta(z) = -w z^2``,
  ``w = 1/(2 sigma^2)``.

Every term is concave in ``k`` (``-lgamma(x + 1)`` is concave, ``-|.|`` and ``-(.)^2`` of an
affine function are concave), so ``f`` is a discrete log-concave law and is sampled **exactly**,
tails included, from the whole range (never a truncated window):

0. a range of fewer than :data:`ENUM_MAX` points is enumerated: ``f`` at every point, then
   inversion of its cdf (exact; cheaper than 1-3 when the cells hold a few units);
1. the mode ``M``: the forward difference ``D(k) = log f(k+1) - log f(k)`` is non-increasing, so
   ``M`` is the smallest ``k`` with ``D(k) <= 0``; found by a galloping search from the current
   state ``k = 0`` and bisection (``O(log |M|)`` evaluations);
2. the points ``kL < M < kR`` nearest the mode where ``log f`` has dropped by at least 1 (galloping
   + bisection again; absent when the range ends first);
3. rejection sampling from the hat ``h(k) = f(M)`` on ``(kL, kR)`` and
   ``h(k) = f(kR) exp(sR (k - kR))`` for ``k >= kR`` (and symmetrically on the left), with
   ``sR = D(kR - 1) < 0``: for ``k >= kR``, ``log f(k) - log f(kR) = sum_{t=kR}^{k-1} D(t) <=
   (k - kR) D(kR - 1)`` because ``D`` is non-increasing, and ``D(kR - 1) <= (log f(kR) -
   log f(M)) / (kR - M) <= -1 / (kR - M) < 0`` (the chord bound, used instead if rounding ever
   makes ``D(kR - 1)`` larger). The geometric tails are truncated at the range's ends and drawn
   by inversion. The acceptance rate is about 3/4 for a Gaussian-like ``f`` whatever its width.

**Collapsed moves** (:func:`pair_move_c` with ``ai, aj > 0``). When the cell probabilities of
the group have a Dirichlet prior ``Dirichlet(alpha)`` and are integrated out, the table's law is
the Dirichlet-multinomial ``p(c) ∝ prod_j Gamma(alpha_j + c_j) / Gamma(c_j + 1)`` and the
pair's conditional is

    log f(k) = lgamma(a_i + c_i + k) - lgamma(c_i + k + 1) + lgamma(a_j + c_j - k)
               - lgamma(c_j - k + 1) + sum_m log eta_m(r_m - k v_m)

(``a_i = alpha_i``, ``dlp = 0``). ``lgamma(a + x) - lgamma(x + 1)`` has second difference
``log((a + x + 1)(x + 1) / ((a + x)(x + 2)))``, which is ``<= 0`` iff ``a >= 1``: the collapsed
conditional is log-concave, and drawn by the same exact scheme, when both concentrations are
at least 1 (for ``a = 1`` the two terms cancel and ``f`` is the mechanism's factor alone).
Callers use it only then.

Differences ``log f(k) - log f(k0)`` are computed in a cancellation-free form (``lgamma``
differences by a Stirling expansion for large arguments, the ``l2`` term as a product, the
``l1`` term by :func:`privpost.inference._kernels.change_l1`), so the move stays exact in
floating point at ``c ~ 10^9`` where ``lgamma`` itself is ``~ 2 * 10^10``, and at residuals
``|r|`` far beyond ``2^53`` for ``l1``.

Random numbers come from the chain's own ``numpy.random.Generator`` passed into the compiled code
(the convention of the compiled DA-MCMC drivers, :mod:`privpost.inference._damcmc_fast`), so a
seeded chain is reproducible.

Arguments shared by the functions below:

==========  =========  ========================================================================
``ci, cj``  float      current counts of the two cells (integers stored as float64, exact to
                       ``2^53``)
``dlp``     float      ``log p_i - log p_j``
``r``       (m,)       residuals ``s - A c`` of the released coordinates either cell touches
``v``       (m,)       ``A[m, i] - A[m, j]``
``w``       (m,)       kernel weights (``weights_for``)
``l2``      (m,) bool  kernel family of each coordinate (``True``: ``l2``; ``False``: ``l1``)
``m``       int        number of entries of ``r, v, w, l2`` in use (buffers may be longer)
==========  =========  ========================================================================
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.inference._kernels import change_l1

__all__ = ["pair_move", "pair_move_c", "log_f", "log_f_rel", "forward_diff", "pmf", "sample_many"]

# lgamma(a + d) - lgamma(a) by Stirling's series once both arguments are at least this large
_STIRLING_MIN = 1.0e4

#: Ranges ``[-c_i, c_j]`` with fewer points than this are sampled by enumerating every point
#: (:func:`_enumerate_draw`; the common case when a table has more cells than units) instead of
#: the mode search and rejection from the hat, which costs more evaluations of ``log f`` there.
ENUM_MAX = 16


@njit(cache=True, nogil=True)
def _lgamma_diff(a, d):
    """``lgamma(a + d) - lgamma(a)`` for ``a > 0``, ``a + d > 0``, free of cancellation.

    For both arguments ``>= 1e4`` Stirling's series: ``lgamma(x) = (x - 1/2) log x - x +
    log(2 pi)/2 + 1/(12 x) - 1/(360 x^3) + O(x^-5)`` (remainder ``< 1e-21`` there), whose
    difference is ``(a - 1/2) log1p(d/a) + d log(a + d) - d`` plus the correction terms' difference;
    otherwise ``lgamma`` directly (values below ``~ 1e5`` or a difference too large to matter)."""
    if d == 0.0:
        return 0.0
    b = a + d
    if a >= _STIRLING_MIN and b >= _STIRLING_MIN:
        main = (a - 0.5) * math.log1p(d / a) + d * math.log(b) - d
        corr = (1.0 / (12.0 * b) - 1.0 / (360.0 * b * b * b)) \
            - (1.0 / (12.0 * a) - 1.0 / (360.0 * a * a * a))
        return main + corr
    return math.lgamma(b) - math.lgamma(a)


@njit(cache=True, nogil=True)
def _log_f_rel(k, k0, ci, cj, dlp, ai, aj, r, v, w, l2, m):
    """``log f(k) - log f(k0)`` (both in ``[-ci, cj]``), cancellation-free; ``ai > 0`` adds the
    collapsed (Dirichlet-multinomial) terms ``lgamma(ai + ci + k) + lgamma(aj + cj - k)``."""
    if k == k0:
        return 0.0
    dk = k - k0
    out = dk * dlp
    out -= _lgamma_diff(ci + k0 + 1.0, dk)
    out -= _lgamma_diff(cj - k0 + 1.0, -dk)
    if ai > 0.0:
        out += _lgamma_diff(ai + ci + k0, dk)
        out += _lgamma_diff(aj + cj - k0, -dk)
    for q in range(m):
        if l2[q]:
            # (r - k v)^2 - (r - k0 v)^2 = (k0 - k) v (2 r - (k + k0) v)
            out -= w[q] * ((k0 - k) * v[q]) * (2.0 * r[q] - (k + k0) * v[q])
        else:
            # |r - k v| - |r - k0 v| from the residual at k0 (exact at any |r|, _kernels)
            out -= w[q] * change_l1(r[q] - k0 * v[q], (k - k0) * v[q])
    return out


@njit(cache=True, nogil=True)
def log_f_rel(k, k0, ci, cj, dlp, r, v, w, l2, m):
    """``log f(k) - log f(k0)`` (both in ``[-ci, cj]``), cancellation-free."""
    return _log_f_rel(k, k0, ci, cj, dlp, 0.0, 0.0, r, v, w, l2, m)


@njit(cache=True, nogil=True)
def _forward_diff(k, ci, cj, dlp, ai, aj, r, v, w, l2, m):
    """``D(k)`` of :func:`forward_diff`, with the collapsed terms when ``ai > 0``
    (``+ log(ai + ci + k) - log(aj + cj - k - 1)``)."""
    out = dlp - math.log(ci + k + 1.0) + math.log(cj - k)
    if ai > 0.0:
        out += math.log(ai + ci + k) - math.log(aj + cj - k - 1.0)
    for q in range(m):
        if l2[q]:
            out -= w[q] * (-v[q]) * (2.0 * r[q] - (2.0 * k + 1.0) * v[q])
        else:
            out -= w[q] * change_l1(r[q] - k * v[q], v[q])
    return out


@njit(cache=True, nogil=True)
def forward_diff(k, ci, cj, dlp, r, v, w, l2, m):
    """``D(k) = log f(k + 1) - log f(k)`` for ``k in [-ci, cj - 1]`` (non-increasing in ``k``)."""
    return _forward_diff(k, ci, cj, dlp, 0.0, 0.0, r, v, w, l2, m)


@njit(cache=True, nogil=True)
def _log_f(k, ci, cj, dlp, ai, aj, r, v, w, l2, m):
    """:func:`log_f`, with the collapsed terms when ``ai > 0``."""
    out = k * dlp - math.lgamma(ci + k + 1.0) - math.lgamma(cj - k + 1.0)
    if ai > 0.0:
        out += math.lgamma(ai + ci + k) + math.lgamma(aj + cj - k)
    for q in range(m):
        z = r[q] - k * v[q]
        if l2[q]:
            out -= w[q] * z * z
        else:
            out -= w[q] * abs(z)
    return out


@njit(cache=True, nogil=True)
def log_f(k, ci, cj, dlp, r, v, w, l2, m):
    """Unnormalised ``log f(k)`` itself (``lgamma`` form; for tests and enumeration at small
    counts -- use :func:`log_f_rel` for differences at large counts)."""
    return _log_f(k, ci, cj, dlp, 0.0, 0.0, r, v, w, l2, m)


@njit(cache=True, nogil=True)
def _bisect_mode(a, b, ci, cj, dlp, ai, aj, r, v, w, l2, m):
    """The smallest ``k in (a, b]`` with ``D(k) <= 0`` given ``D(a) > 0`` (or ``a`` below the
    range) and ``D(b) <= 0`` (or ``b`` the range's end): bisection on the forward difference."""
    while b - a > 1.0:
        mid = np.floor(0.5 * (a + b))
        if _forward_diff(mid, ci, cj, dlp, ai, aj, r, v, w, l2, m) <= 0.0:
            b = mid
        else:
            a = mid
    return b


@njit(cache=True, nogil=True)
def _mode(lo, hi, ci, cj, dlp, ai, aj, r, v, w, l2, m):
    """Smallest ``k in [lo, hi]`` with ``D(k) <= 0`` (``hi`` when none): the mode of ``f``.
    Galloping search from ``0`` (the current state, ``lo <= 0 <= hi``), then bisection."""
    if lo == hi:
        return lo
    if 0.0 < hi and _forward_diff(0.0, ci, cj, dlp, ai, aj, r, v, w, l2, m) > 0.0:
        # mode is to the right of 0: find a with D(a) > 0, b with D(b) <= 0 or b = hi
        a = 0.0
        step = 1.0
        while True:
            b = a + step
            if b >= hi:
                b = hi
                break
            if _forward_diff(b, ci, cj, dlp, ai, aj, r, v, w, l2, m) <= 0.0:
                break
            a = b
            step *= 2.0
        # invariant: D(a) > 0; D(b) <= 0 or b == hi; answer in (a, b]
        return _bisect_mode(a, b, ci, cj, dlp, ai, aj, r, v, w, l2, m)
    # D(0) <= 0 (or 0 == hi): mode <= 0. Find b with D(b) <= 0, a with D(a) > 0 or a = lo - 1
    b = 0.0
    step = 1.0
    while True:
        a = b - step
        if a < lo:
            a = lo - 1.0
            break
        if _forward_diff(a, ci, cj, dlp, ai, aj, r, v, w, l2, m) > 0.0:
            break
        b = a
        step *= 2.0
    # invariant: D(b) <= 0 (or b == hi == 0); D(a) > 0 or a == lo - 1; answer in (a, b]
    return _bisect_mode(a, b, ci, cj, dlp, ai, aj, r, v, w, l2, m)


#: Steps walked one at a time (summing forward differences) from the mode before the search for
#: the drop point switches to galloping + bisection.
_WALK = 8


@njit(cache=True, nogil=True)
def _drop_point(mode, end, direction, ci, cj, dlp, ai, aj, r, v, w, l2, m):
    """Nearest ``k`` beyond ``mode`` in ``direction`` (+1 or -1), not past ``end``, with
    ``log f(k) - log f(mode) <= -1``; ``end + direction`` when there is none. The first
    :data:`_WALK` points are walked (``log f`` by running sums of forward differences: the
    common narrow case costs two logarithms a step), then galloping search + bisection on
    ``log_f_rel`` (``log f`` is unimodal, so the drop is monotone beyond the mode). Any point
    beyond the mode with ``f`` below ``f(mode)`` gives a valid hat (``pair_move``), so the
    rounding of either way of computing the drop cannot make the draw inexact."""
    if mode == end:
        return end + direction
    # walk
    drop = 0.0
    k = mode
    for _ in range(_WALK):
        if k == end:
            return end + direction
        if direction > 0.0:
            drop += _forward_diff(k, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        else:
            drop -= _forward_diff(k - 1.0, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        k += direction
        if drop <= -1.0:
            return k
    if _log_f_rel(end, mode, ci, cj, dlp, ai, aj, r, v, w, l2, m) > -1.0:
        return end + direction
    # near: drop > -1 ; far: drop <= -1
    near = k
    step = float(_WALK)
    while True:
        far = near + direction * step
        if (far - end) * direction >= 0.0:
            far = end
            break
        if _log_f_rel(far, mode, ci, cj, dlp, ai, aj, r, v, w, l2, m) <= -1.0:
            break
        near = far
        step *= 2.0
    while abs(far - near) > 1.0:
        mid = np.floor(0.5 * (far + near))
        if _log_f_rel(mid, mode, ci, cj, dlp, ai, aj, r, v, w, l2, m) <= -1.0:
            far = mid
        else:
            near = mid
    return far


@njit(cache=True, nogil=True)
def _geom_mass(slope, length):
    """``sum_{j=0}^{length-1} exp(slope j)`` for ``slope < 0``, ``length >= 1`` (length may be
    huge)."""
    return -math.expm1(slope * length) / -math.expm1(slope)


@njit(cache=True, nogil=True)
def _geom_draw(slope, length, rng):
    """A draw of ``j in {0, ..., length-1}`` with ``P(j) ∝ exp(slope j)`` (``slope < 0``), by
    inversion."""
    u = rng.random()
    # P(J <= j) = (1 - e^{slope (j+1)}) / (1 - e^{slope length}); invert
    tot = -math.expm1(slope * length)
    j = np.floor(math.log1p(-u * tot) / slope)
    if j < 0.0:
        j = 0.0
    if j > length - 1.0:
        j = length - 1.0
    return j


@njit(cache=True, nogil=True)
def _enumerate_draw(lo, hi, ci, cj, dlp, ai, aj, r, v, w, l2, m, rng):
    """An exact draw of ``k`` from ``f`` on a tiny range ``[lo, hi]`` (``hi - lo < ENUM_MAX``,
    ``lo <= 0 <= hi``): ``log f(k) - log f(lo)`` at every point as the running sum of the
    forward differences (two logarithms each, no ``lgamma``), then inversion of the cdf."""
    size = int(hi - lo) + 1
    lf = np.empty(size)
    lf[0] = 0.0
    top = 0.0
    for t in range(1, size):
        x = lf[t - 1] + _forward_diff(lo + t - 1.0, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        lf[t] = x
        if x > top:
            top = x
    tot = 0.0
    for t in range(size):
        lf[t] = math.exp(lf[t] - top)
        tot += lf[t]
    u = rng.random() * tot
    acc = 0.0
    for t in range(size - 1):
        acc += lf[t]
        if u < acc:
            return lo + t
    return hi


@njit(cache=True, nogil=True)
def pair_move_c(ci, cj, dlp, ai, aj, r, v, w, l2, m, rng):
    """:func:`pair_move` for the multinomial (``ai = 0``) or the collapsed (``ai, aj >= 1``)
    conditional (module docstring, "Collapsed moves"); returns ``k`` as a float64 integer."""
    lo = -ci
    hi = cj
    if lo == hi:
        return 0.0
    if hi - lo < ENUM_MAX:
        return _enumerate_draw(lo, hi, ci, cj, dlp, ai, aj, r, v, w, l2, m, rng)
    mode = _mode(lo, hi, ci, cj, dlp, ai, aj, r, v, w, l2, m)
    kr = _drop_point(mode, hi, 1.0, ci, cj, dlp, ai, aj, r, v, w, l2, m)
    kl = _drop_point(mode, lo, -1.0, ci, cj, dlp, ai, aj, r, v, w, l2, m)
    # flat part: (kl, kr) intersected with [lo, hi], height 1 (relative to f(mode))
    flat_lo = max(kl + 1.0, lo)
    flat_hi = min(kr - 1.0, hi)
    w_flat = flat_hi - flat_lo + 1.0
    # right tail [kr, hi]
    w_right = 0.0
    g_r = 0.0
    s_r = -1.0
    n_r = 0.0
    if kr <= hi:
        g_r = _log_f_rel(kr, mode, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        s_r = _forward_diff(kr - 1.0, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        chord = g_r / (kr - mode)
        if not s_r <= chord:
            s_r = chord
        n_r = hi - kr + 1.0
        w_right = math.exp(g_r) * _geom_mass(s_r, n_r)
    w_left = 0.0
    g_l = 0.0
    s_l = -1.0
    n_l = 0.0
    if kl >= lo:
        g_l = _log_f_rel(kl, mode, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        # going left: log f(kl - j) <= g_l + j * s_l with s_l = -D(kl) (D(kl) >= chord > 0)
        s_l = -_forward_diff(kl, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        chord = g_l / (mode - kl)
        if not s_l <= chord:
            s_l = chord
        n_l = kl - lo + 1.0
        w_left = math.exp(g_l) * _geom_mass(s_l, n_l)
    total = w_flat + w_right + w_left
    while True:
        u = rng.random() * total
        if u < w_flat:
            k = flat_lo + np.floor(rng.random() * w_flat)
            if k > flat_hi:
                k = flat_hi
            log_h = 0.0
        elif u < w_flat + w_right:
            j = _geom_draw(s_r, n_r, rng)
            k = kr + j
            log_h = g_r + s_r * j
        else:
            j = _geom_draw(s_l, n_l, rng)
            k = kl - j
            log_h = g_l + s_l * j
        lf = _log_f_rel(k, mode, ci, cj, dlp, ai, aj, r, v, w, l2, m)
        if -rng.standard_exponential() < lf - log_h:
            return k


@njit(cache=True, nogil=True)
def pair_move(ci, cj, dlp, r, v, w, l2, m, rng):
    """An exact draw of ``k`` from ``f`` on ``[-ci, cj]`` (see the module docstring); returns
    ``k`` as a float64 integer. Units move ``c_i += k``, ``c_j -= k``; the caller updates the
    residuals (``r_m -= k v_m``)."""
    return pair_move_c(ci, cj, dlp, 0.0, 0.0, r, v, w, l2, m, rng)


@njit(cache=True, nogil=True)
def sample_many(n_draws, ci, cj, dlp, r, v, w, l2, rng, ai=0.0, aj=0.0):
    """``n_draws`` independent draws of :func:`pair_move_c` at fixed state (tests)."""
    out = np.empty(n_draws)
    m = r.shape[0]
    for t in range(n_draws):
        out[t] = pair_move_c(ci, cj, dlp, ai, aj, r, v, w, l2, m, rng)
    return out


def pmf(ci, cj, dlp, r, v, w, l2, *, drop_lgamma: bool = False, ai: float = 0.0,
        aj: float = 0.0):
    """The exact normalised pmf of ``k`` on ``[-ci, cj]`` by enumeration (tests; small counts).

    ``ai, aj > 0``: the collapsed conditional (Dirichlet concentrations of the two cells).
    ``drop_lgamma=True`` leaves the multinomial coefficient out (a deliberately wrong law).
    Returns ``(ks, probs)``, each ``(cj + ci + 1,)``."""
    r, v, w = (np.ascontiguousarray(x, dtype=np.float64) for x in (r, v, w))
    l2 = np.ascontiguousarray(l2, dtype=np.bool_)
    ks = np.arange(-int(ci), int(cj) + 1, dtype=np.float64)
    lf = np.array([_log_f(k, float(ci), float(cj), float(dlp), float(ai), float(aj), r, v, w,
                          l2, r.shape[0]) for k in ks])
    if drop_lgamma:
        from scipy.special import gammaln
        lf = lf + gammaln(ci + ks + 1.0) + gammaln(cj - ks + 1.0)
    lf -= lf.max()
    p = np.exp(lf)
    return ks, p / p.sum()
