"""The quantile-shift (non-centred) move of :class:`~privpost.inference._count_occupied.
OccupiedTableChain`, compiled for a log-linear joint table -- the CliqueMRF's (issue 21: the
mrf4 chain at ``n = 10^2`` is limited by the theta--table coupling, not by its theta kernel;
benchmarks/README.md, "CliqueMRF theta kernel compiled").

The move is :meth:`OccupiedTableChain._quantile_shift` (its docstring derives it) with the
model's pieces written out for a table whose log cell probabilities are
``log p_x = sum_a theta[idx[x, a]] - A(theta)`` (``idx (J, m)`` int64: the flat clique cell of
each (joint cell, clique)), a prior ``N(0, sigma^2 I_d)`` on ``theta (d,)`` and free
coordinates ``v = B' theta`` (``B (d, r)`` orthonormal; ``theta' = theta + B (v' - v)``, unit
Jacobian, the unidentified component held):

1. the units' uniforms given their cells, ``u ~ U[F(x - 1), F(x))`` for each of the ``c_x``
   units of cell ``x`` (cells in index order, ``F`` the CDF of ``p_theta``);
2. ``v' = v + e^{iw_f[0]} chol z``, ``z ~ N(0, I_r)``;
3. ``c' = hist(F_theta'^{-1}(u))``, accepted with probability ``min(1, exp(-||theta'||^2 /
   (2 sigma^2) + ||theta||^2 / (2 sigma^2)) eta(s | A c') / eta(s | A c))``.

Draw for draw the Python move's (``random()`` per unit, in cell order; ``standard_normal()``
per free coordinate; ``random()`` for the test), so the two agree to rounding on the same state
and generator (tests/test_mrf_kernel.py). Cost per move ``O(J m + N log J + r d)``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.inference._count_table import residuals, table_change
from privpost.inference._kernels import log_eta_change
from privpost.inference._damcmc_fast import _iw_adapt, _iw_propose
from privpost.models._mrf_kernel import cell_log_potentials

__all__ = ["loglinear_log_probs", "quantile_shift_moves"]


@njit(cache=True, nogil=True)
def loglinear_log_probs(theta, idx, lp):
    """``lp (J,)``: the normalised log cell probabilities ``sum_a theta[idx[x, a]] - A``."""
    J = idx.shape[0]
    mx = cell_log_potentials(theta, idx, lp)
    tot = 0.0
    for x in range(J):
        tot += math.exp(lp[x] - mx)
    a_ = mx + math.log(tot)
    for x in range(J):
        lp[x] -= a_


@njit(cache=True, nogil=True)
def _cdf(lp, F):
    """``F (J,)``: the CDF of ``exp(lp)`` in cell order, as the Python move computes it
    (``cumsum(exp(lp - max)) / last``)."""
    J = lp.shape[0]
    mx = -np.inf
    for x in range(J):
        if lp[x] > mx:
            mx = lp[x]
    acc = 0.0
    for x in range(J):
        acc += math.exp(lp[x] - mx)
        F[x] = acc
    last = F[J - 1]
    for x in range(J):
        F[x] /= last


@njit(cache=True, nogil=True)
def quantile_shift_moves(theta, c, lp, B, idx, sigma, n_shift, adapting, cell_ptr, cell_coord,
                         cell_coef, s, w, l2, r, r_new, iw_f, iw_i, mean, m2, chol, rng):
    """``n_shift`` quantile-shift moves (module docstring), in place on ``theta (d,)``, the
    table ``c (J,)`` and its log cell probabilities ``lp (J,)``. ``r, r_new (n_coords,)``:
    work; ``iw_f, iw_i, mean, m2, chol``: the adapted proposal
    (:func:`privpost.inference._damcmc_fast._iw_adapt`; adapted while ``adapting``, else
    ``iw_i[2]`` counts the proposals and ``iw_i[3]`` the acceptances). Returns the number of
    accepted moves."""
    J = c.shape[0]
    d, dim = B.shape
    N = 0
    for x in range(J):
        N += int(c[x])
    inv_s2 = 1.0 / (sigma * sigma)
    v = np.zeros(dim)
    for a in range(d):
        for k in range(dim):
            v[k] += B[a, k] * theta[a]
    tt = 0.0
    for a in range(d):
        tt += theta[a] * theta[a]
    lpr = -0.5 * tt * inv_s2
    residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
    F = np.empty(J)
    Fn = np.empty(J)
    u = np.empty(N)
    z = np.empty(dim)
    vp = np.empty(dim)
    thp = np.empty(d)
    lp_new = np.empty(J)
    c_new = np.empty(J)
    moved = 0
    for _ in range(n_shift):
        _cdf(lp, F)
        q = 0
        for x in range(J):
            lo = F[x - 1] if x > 0 else 0.0
            for _k in range(int(c[x])):
                u[q] = lo + (F[x] - lo) * rng.random()
                q += 1
        _iw_propose(dim, v, iw_f, chol, z, vp, rng)
        log_u = math.log1p(-rng.random())
        tt = 0.0
        for a in range(d):
            dv = 0.0
            for k in range(dim):
                dv += B[a, k] * (vp[k] - v[k])
            thp[a] = theta[a] + dv
            tt += thp[a] * thp[a]
        lprp = -0.5 * tt * inv_s2
        loglinear_log_probs(thp, idx, lp_new)
        _cdf(lp_new, Fn)
        for x in range(J):
            c_new[x] = 0.0
        for q in range(N):
            lo_, hi = 0, J          # first x with Fn[x] > u[q] (searchsorted right), capped
            while lo_ < hi:
                mid = (lo_ + hi) // 2
                if Fn[mid] > u[q]:
                    hi = mid
                else:
                    lo_ = mid + 1
            c_new[min(lo_, J - 1)] += 1.0
        # noise part from the residuals r = s - A c and the change A (c_new - c)
        # (cancellation-free, _kernels); r_new holds the change
        table_change(c, c_new, cell_ptr, cell_coord, cell_coef, r_new)
        la = log_eta_change(r, r_new, w, l2) + lprp - lpr
        if la != la:
            la = -np.inf
        alpha = 1.0 if la >= 0 else math.exp(la)
        if log_u < la:
            for a in range(d):
                theta[a] = thp[a]
            for k in range(dim):
                v[k] = vp[k]
            lpr = lprp
            for x in range(J):
                c[x] = c_new[x]
                lp[x] = lp_new[x]
            for m in range(r.shape[0]):
                r[m] -= r_new[m]
            moved += 1
            if not adapting:
                iw_i[3] += 1
        if adapting:
            _iw_adapt(v, alpha, iw_f, iw_i, mean, m2, chol)
        else:
            iw_i[2] += 1
    return moved
