"""Compiled inner loops of the DA-MCMC sampler (seed 000, Algorithm 1 step 2; DESIGN.md §3).

The sequential part of a record sweep -- accept or reject the proposal for record ``i`` given the
running sum ``T = sum_i t(x_i)``, then update ``T`` -- depends only on the *mechanism*, and only
through its kernel family (``Mechanism.kernel``):

* ``"l1"``: ``log g(s, T) = const - sum_j w_j |s_j - T_j|`` with ``w_j = 1 / scale``
  (Laplace with scale ``b``; discrete Laplace with parameter ``t``);
* ``"l2"``: ``log g(s, T) = const - sum_j w_j (s_j - T_j)^2`` with ``w_j = 1 / (2 scale^2)``
  (Gaussian with standard deviation ``sigma``; discrete Gaussian with parameter ``sigma``).

So one compiled loop per family serves every model and query: the proposals and their
contributions are computed vectorised (NumPy) before the loop. Cost per record is ``O(d)``
arithmetic, no allocation, no Python.

Every sweep function has the signature::

    sweep_xx(T, s_obs, t_cur, t_prop, log_extra, log_u, weight, accept, record_counts,
             sweep_counts) -> int   # number of accepted proposals

=================  ==========  ===============================================================
``T``              (d,)        running sum of the current contributions (updated in place)
``s_obs``          (d,)        the observed noisy release
``t_cur``          (n, d)      contributions of the current records (accepted rows overwritten)
``t_prop``         (k*n, d)    contributions of proposals for ``k`` consecutive sweeps; row
                               ``j*n + i`` is the proposal for record ``i`` in sweep ``j``
``log_extra``      (k*n,)      extra per-proposal log acceptance terms (Algorithm 2:
                               ``log f(x*) - log f(x) + log q(x|x*) - log q(x*|x)``), or an
                               empty array (Algorithm 1, model proposals)
``log_u``          (k*n,)      ``log`` of uniform(0, 1) draws; accept iff ``log_u < log ratio``
``weight``         (d,)        ``1/scale`` (l1) or ``1/(2 scale^2)`` (l2), per coordinate
``accept``         (k*n,) bool output: accept mask
``record_counts``  (n,) int64  incremented for every accepted proposal of record ``i``
``sweep_counts``   (k,) int64  output: number accepted in each sweep
=================  ==========  ===============================================================

The acceptance log ratio of the proposal for record ``i`` is
``log g(s, T - t_cur[i] + t_prop[i]) - log g(s, T) (+ log_extra[i])``, computed coordinate by
coordinate from the residual ``r_j = s_j - T_j`` and the change ``d_j = t_prop[i, j] -
t_cur[i, j]`` of the statistic by :func:`noise_change` -- never as a difference of two full
terms -- so that coordinates a proposal does not change contribute 0 and the ratio keeps its
precision when the release is far from every feasible statistic; ``T`` is updated only in
coordinates that change (counts stay exact; real sums are recomputed from scratch periodically
by the drivers to stop floating-point drift).

**Cancellation-free noise changes** (:func:`change_l1`, :func:`change_l2`, :func:`noise_change`,
:func:`log_eta_change`, :func:`log_g_change`; used by every latent engine: records, count
tables, margins, HMM counts). With ``r = s - a`` the residual of one coordinate and ``a -> a +
d`` a change of its statistic, the new residual is ``r - d`` and

* ``l2``: ``(r - d)^2 - r^2 = d (d - 2 r)`` (exact algebra). The difference of the two squares
  loses ``~ r^2 * 2^-53`` absolutely -- at ``r ~ 1e8`` about ``1`` unit of ``w z^2``, so a
  Gaussian release ``10^8`` away from every feasible table gets ratios wrong by ``O(w)``
  (review3, ``section_cancel``: ``z ~ -5`` and ``+8`` on the joint-table and record paths). The
  product form has relative error ``~ 2^-52`` of the ratio itself, and its only inexact input is
  ``r`` (exact to ``ulp(s)``: ``a`` is a sum of integers or of the contributions);
* ``l1``: ``|r - d| - |r|`` is ``-d`` when ``r`` and ``r - d`` are both ``>= 0``, ``d`` when
  both are ``<= 0``, and otherwise ``|r - d| - |r|`` with ``|r|, |r - d| <= |d|`` (no large
  terms left): exact whatever ``|r|`` is (even where ``r - d`` rounds to ``r``), computed
  branch-free as ``max(-e, e - 2 |r|)`` with ``e = sign(r) d``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["KERNELS", "LOG_G", "LOG_RATIO", "weights_for", "sweep", "log_g", "log_ratio",
           "sweep_l1", "sweep_l2", "sweep_cells", "log_g_l1", "log_g_l2", "log_ratio_l1",
           "log_ratio_l2", "change_l1", "change_l2", "noise_change", "log_eta_change",
           "log_g_change"]


# Reassociation lets LLVM vectorise the O(d) sums; no flag changes inf/NaN semantics (a -inf
# log_extra still means "reject").
_FAST = {"reassoc", "nsz", "contract"}


@njit(cache=True, nogil=True)
def change_l2(r, d):
    """``(r - d)^2 - r^2`` as ``d (d - 2 r)`` (module docstring): the change of the ``l2``
    kernel's ``z^2`` when the statistic moves by ``d`` from residual ``r = s - a``."""
    return d * (d - 2.0 * r)


@njit(cache=True, nogil=True)
def change_l1(r, d):
    """``|r - d| - |r|``, exact whatever ``|r|`` (module docstring), branch-free: with ``e =
    sign(r) d`` it is ``-e`` where ``e <= |r|`` (``r`` and ``r - d`` on one side of 0) and
    ``e - 2 |r|`` otherwise (then ``|r| < e``: no large terms), i.e. ``max(-e, e - 2 |r|)``.
    Where ``r - d`` is exact this is the correctly rounded value the direct difference gives
    (same draws as before); where it is not (``|r| >~ 2^53 |d|``) it is still exact. Costs
    ~3 % more than the direct difference in the record sweep (benchmarks/README.md)."""
    e = d * math.copysign(1.0, r)
    return max(-e, e - 2.0 * abs(r))


@njit(cache=True, nogil=True)
def noise_change(r, d, w, l2):
    """``log eta(r - d) - log eta(r)`` of one coordinate (``-w z^2`` if ``l2`` else
    ``-w |z|``), cancellation-free; ``0`` when ``d == 0``."""
    if d == 0.0:
        return 0.0
    if l2:
        return -w * change_l2(r, d)
    return -w * change_l1(r, d)


@njit(cache=True, nogil=True)
def log_eta_change(r, dr, w, l2):
    """``sum_m log eta_m(r[m] - dr[m]) - log eta_m(r[m])``: the change of the noise log-density
    when the released statistic moves by ``dr`` from residuals ``r = s - a``, all ``(d,)``
    (``w`` weights, ``l2`` bool kernel family), each coordinate by :func:`noise_change`. Pass
    the change ``dr`` computed from the latent itself (``A (c' - c)``, exact integers on the
    count paths), not ``r - r_new``: at ``|s| >~ 2^53`` the two residuals round to the same
    float and their difference is lost."""
    out = 0.0
    for m in range(r.shape[0]):
        out += noise_change(r[m], dr[m], w[m], l2[m])
    return out


@njit(cache=True, nogil=True)
def log_g_change(T, Tp, s_obs, weight, use_l2):
    """``log g(s, Tp) - log g(s, T)`` (all ``(d,)``; one kernel family ``use_l2`` for every
    coordinate), coordinate by coordinate from ``r = s - T`` and ``d = Tp - T``
    (:func:`noise_change`)."""
    out = 0.0
    for j in range(T.shape[0]):
        out += noise_change(s_obs[j] - T[j], Tp[j] - T[j], weight[j], use_l2)
    return out


@njit(cache=True, nogil=True, fastmath=_FAST)
def sweep_l1(T, s_obs, t_cur, t_prop, log_extra, log_u, weight, accept, record_counts,
             sweep_counts):
    n, d = t_cur.shape
    k = t_prop.shape[0] // n
    has_extra = log_extra.shape[0] > 0
    total = 0
    for sw in range(k):
        acc_sweep = 0
        base = sw * n
        for i in range(n):
            row = base + i
            delta = 0.0
            for j in range(d):
                delta -= weight[j] * change_l1(s_obs[j] - T[j], t_prop[row, j] - t_cur[i, j])
            if has_extra:
                delta += log_extra[row]
            if log_u[row] < delta:
                for j in range(d):
                    tc = t_cur[i, j]
                    tp = t_prop[row, j]
                    if tc != tp:
                        T[j] = T[j] - tc + tp
                        t_cur[i, j] = tp
                accept[row] = True
                record_counts[i] += 1
                acc_sweep += 1
            else:
                accept[row] = False
        sweep_counts[sw] = acc_sweep
        total += acc_sweep
    return total


@njit(cache=True, nogil=True, fastmath=_FAST)
def sweep_l2(T, s_obs, t_cur, t_prop, log_extra, log_u, weight, accept, record_counts,
             sweep_counts):
    n, d = t_cur.shape
    k = t_prop.shape[0] // n
    has_extra = log_extra.shape[0] > 0
    total = 0
    for sw in range(k):
        acc_sweep = 0
        base = sw * n
        for i in range(n):
            row = base + i
            delta = 0.0
            for j in range(d):
                delta -= weight[j] * change_l2(s_obs[j] - T[j], t_prop[row, j] - t_cur[i, j])
            if has_extra:
                delta += log_extra[row]
            if log_u[row] < delta:
                for j in range(d):
                    tc = t_cur[i, j]
                    tp = t_prop[row, j]
                    if tc != tp:
                        T[j] = T[j] - tc + tp
                        t_cur[i, j] = tp
                accept[row] = True
                record_counts[i] += 1
                acc_sweep += 1
            else:
                accept[row] = False
        sweep_counts[sw] = acc_sweep
        total += acc_sweep
    return total


@njit(cache=True, nogil=True)
def log_g_l1(T, s_obs, weight):
    """``-sum_j w_j |s_j - T_j|`` (the l1 log density without its constant)."""
    out = 0.0
    for j in range(T.shape[0]):
        out -= weight[j] * abs(s_obs[j] - T[j])
    return out


@njit(cache=True, nogil=True)
def log_g_l2(T, s_obs, weight):
    """``-sum_j w_j (s_j - T_j)^2`` (the l2 log density without its constant)."""
    out = 0.0
    for j in range(T.shape[0]):
        r = s_obs[j] - T[j]
        out -= weight[j] * r * r
    return out


@njit(cache=True, nogil=True, fastmath=_FAST)
def log_ratio_l1(T, s_obs, t_cur_i, t_prop_i, weight):
    """Log acceptance ratio (before ``min(0, .)``) of replacing contribution ``t_cur_i`` by
    ``t_prop_i`` in state ``T``, exactly as :func:`sweep_l1` computes it."""
    delta = 0.0
    for j in range(T.shape[0]):
        delta -= weight[j] * change_l1(s_obs[j] - T[j], t_prop_i[j] - t_cur_i[j])
    return delta


@njit(cache=True, nogil=True, fastmath=_FAST)
def log_ratio_l2(T, s_obs, t_cur_i, t_prop_i, weight):
    """As :func:`log_ratio_l1` for the l2 family."""
    delta = 0.0
    for j in range(T.shape[0]):
        delta -= weight[j] * change_l2(s_obs[j] - T[j], t_prop_i[j] - t_cur_i[j])
    return delta


@njit(cache=True, nogil=True)
def sweep_cells(use_l2, T, s_obs, c_cur, c_prop, log_u, weight, accept, record_counts,
                sweep_counts):
    """:func:`sweep_l1` / :func:`sweep_l2` (Algorithm 1, no ``log_extra``) for **one-hot
    contributions given by their cells**: record ``i`` contributes 1 to each of the ``K`` cells
    ``c_cur[i, :]`` and 0 elsewhere, and cell position ``k`` ranges over its own block of
    coordinates, disjoint from the other positions' (e.g. ``NaiveBayesCounts``: one cell in
    each of the K tables; ``Histogram``: K = 1).

    ``c_cur`` (n, K) int64 cells of the current records (updated in place on acceptance),
    ``c_prop`` (k*n, K) int64 cells of the proposals (row ``j*n + i``: sweep ``j``, record
    ``i``); the other arguments as in :func:`sweep_l1` (no dense contributions: a driver that
    keeps them rebuilds them from the records).

    Same acceptance ratio as the dense sweeps, computed over the changed cells only: replacing
    the record's cell ``a`` by ``b != a`` in position ``k`` changes ``T_a`` by -1 and ``T_b`` by +1
    (the positions' blocks are disjoint, so no other coordinate changes), and the dense sweep's
    terms ``w_j (|r_j| - |r_j + (t_cur[i, j] - t_prop[j])|)`` (l1; l2 with squares) are 0 on
    every other coordinate; here the same nonzero terms (the same :func:`change_l2` /
    :func:`change_l1` of the residuals, ``d = -1`` and ``+1``) are summed in position order, so
    the log ratio equals the dense one up to the order of summation (a difference of a few ulps,
    which can change a decision only when ``log_u`` lies within it). ``T`` is updated by the same exact
    integer steps. Cost O(K) per record instead of O(d). Returns the number accepted.
    """
    n, K = c_cur.shape
    k = c_prop.shape[0] // n
    total = 0
    for sw in range(k):
        acc_sweep = 0
        base = sw * n
        for i in range(n):
            row = base + i
            delta = 0.0
            for q in range(K):
                a = c_cur[i, q]
                b = c_prop[row, q]
                if a != b:
                    # T_a -1, T_b +1: each term from its residual (cancellation-free)
                    ra = s_obs[a] - T[a]
                    rb = s_obs[b] - T[b]
                    if use_l2:
                        delta -= weight[a] * change_l2(ra, -1.0)
                        delta -= weight[b] * change_l2(rb, 1.0)
                    else:
                        delta -= weight[a] * change_l1(ra, -1.0)
                        delta -= weight[b] * change_l1(rb, 1.0)
            if log_u[row] < delta:
                for q in range(K):
                    a = c_cur[i, q]
                    b = c_prop[row, q]
                    if a != b:
                        T[a] = T[a] - 1.0
                        T[b] = T[b] + 1.0
                        c_cur[i, q] = b
                accept[row] = True
                record_counts[i] += 1
                acc_sweep += 1
            else:
                accept[row] = False
        sweep_counts[sw] = acc_sweep
        total += acc_sweep
    return total


KERNELS = {"l1": sweep_l1, "l2": sweep_l2}
LOG_G = {"l1": log_g_l1, "l2": log_g_l2}
LOG_RATIO = {"l1": log_ratio_l1, "l2": log_ratio_l2}


def weights_for(kernel: str, scale, d: int) -> np.ndarray:
    """Per-coordinate weights ``w`` (shape ``(d,)``) of kernel family ``kernel`` at ``scale``.

    ``scale`` is the mechanism's scale (Laplace ``b``, Gaussian standard deviation, discrete
    Laplace ``t``, discrete Gaussian ``sigma``), a scalar or a ``(d,)`` array.
    """
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (d,))
    if kernel == "l1":
        return np.ascontiguousarray(1.0 / scale)
    if kernel == "l2":
        return np.ascontiguousarray(1.0 / (2.0 * scale * scale))
    raise ValueError(f"unknown kernel family {kernel!r}; expected 'l1' or 'l2'")


def sweep(kernel, T, s_obs, t_cur, t_prop, log_extra, log_u, scale):
    """Convenience wrapper (tests, experiments): one or more sweeps, returns the accept mask.

    Same arguments as the compiled sweeps except that ``scale`` is the mechanism's scale and the
    outputs are allocated here. ``T`` and ``t_cur`` are updated in place (they must be C-contiguous
    float64 arrays). ``log_extra=None`` means Algorithm 1.
    """
    t_cur = _check_f64(t_cur, "t_cur", 2)
    T = _check_f64(T, "T", 1)
    n, d = t_cur.shape
    t_prop = np.ascontiguousarray(t_prop, dtype=np.float64).reshape(-1, d)
    m = t_prop.shape[0]
    if m % n:
        raise ValueError(f"t_prop has {m} rows, not a multiple of n = {n}")
    log_u = np.ascontiguousarray(log_u, dtype=np.float64).reshape(m)
    extra = (np.empty(0) if log_extra is None
             else np.ascontiguousarray(log_extra, dtype=np.float64).reshape(m))
    accept = np.empty(m, dtype=np.bool_)
    KERNELS[kernel](T, np.ascontiguousarray(s_obs, dtype=np.float64), t_cur, t_prop, extra,
                    log_u, weights_for(kernel, scale, d), accept, np.zeros(n, np.int64),
                    np.zeros(m // n, np.int64))
    return accept


def log_g(kernel, T, s_obs, scale) -> float:
    """Unnormalised ``log g(s, T)`` of family ``kernel`` (no constant)."""
    T = np.ascontiguousarray(T, dtype=np.float64)
    return float(LOG_G[kernel](T, np.ascontiguousarray(s_obs, dtype=np.float64),
                               weights_for(kernel, scale, T.shape[0])))


def log_ratio(kernel, T, s_obs, t_cur_i, t_prop_i, scale) -> float:
    """Log acceptance ratio of one record replacement, as the compiled sweep computes it."""
    T = np.ascontiguousarray(T, dtype=np.float64)
    return float(LOG_RATIO[kernel](T, np.ascontiguousarray(s_obs, dtype=np.float64),
                                   np.ascontiguousarray(t_cur_i, dtype=np.float64),
                                   np.ascontiguousarray(t_prop_i, dtype=np.float64),
                                   weights_for(kernel, scale, T.shape[0])))


def _check_f64(a, name, ndim):
    if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == ndim
            and a.flags.c_contiguous and a.flags.writeable):
        raise TypeError(f"{name} must be a writeable C-contiguous float64 array with {ndim} "
                        f"dimension(s) (it is updated in place)")
    return a


@njit(cache=True, nogil=True)
def copy_accepted(records, prop, accept):
    """``records[i] = prop[r]`` for every accepted row ``r`` (record ``i = r mod n``), in order.

    ``records``: (n, w); ``prop``: (k*n, w) of the same dtype; ``accept``: (k*n,) bool.
    """
    n, w = records.shape
    for r in range(prop.shape[0]):
        if accept[r]:
            i = r % n
            for c in range(w):
                records[i, c] = prop[r, c]
