"""Compiled non-centred (interweaving) move of :class:`~privpost.models.NaiveBayesLogLinear`.

The Numba version of ``NaiveBayesLogLinear.innovations`` / ``from_innovations`` and of the
additive log-ratio walk on the class probabilities ``p`` (``models/_simplex_move.py``), in the
:class:`~privpost.inference._damcmc_fast.CompiledInterweave` protocol, so that the compiled chain
driver runs the same move as the generic path (same Generator calls, same chain for the same
seed up to rounding; tests/test_compiled_more_moves.py).

Layouts (``docs/internals.md``, "Compiled fast path"): ``theta`` ``(I + sum_k I J_k,)`` is ``p``
then every table ``q_k`` ``(I, J_k)`` row-major; records and innovations are ``(m, K + 1)``
(``[y, x_1..x_K]`` as floats; ``u`` uniforms in the same columns).

* innovations: ``u_0 ~ U(c_{y-1}, c_y]`` with ``c = cumsum(p)``, then for every feature ``k``
  ``u_k ~ U(C^k_{y, x_k - 1}, C^k_{y, x_k}]`` with ``C^k = cumsum(q_k, axis=1)`` -- column by
  column, one ``rng.random()`` per record and column (the Python ``rng.random(n)`` per column);
* from_innovations: ``y = min(searchsorted(c, u_0, "left"), I - 1)`` and
  ``x_k = min(#{j : C^k_{y, j} < u_k}, J_k - 1)``;
* free coordinates ``v_i = log(p_i / p_{I-1})``, ``i < I - 1`` (``dim = I - 1``); ``p =
  softmax([v, 0])``; the tables are copied unchanged;
* ``log_target = sum_i class_alpha_i log p_i``: the Dirichlet(class_alpha) log density
  ``sum_i (class_alpha_i - 1) log p_i`` plus the log-Jacobian ``sum_i log p_i`` (``-inf`` if
  some ``p_i <= 0``); the tables' prior does not change under the move;
* fused step (:func:`fused_step_for`, a ``NaiveBayesCounts`` release of the same shape): the
  records ``from_innovations(theta, u)``, their one-hot contributions and the column sums ``T``
  in one pass, ``T`` counted per record (K increments) instead of summed over the ``(m, d)``
  contributions; ``log p(u | theta) = 0`` (u is uniform whatever theta). Every value is the
  three passes' one exactly (records and contributions are the same integers; ``T``'s entries
  are sums of 0/1 floats, exact in any order), so the chain is bit-identical with or without it.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit

from privpost.models._alr import _alr_from_free, _alr_to_free, _dirichlet_alr_log_target

__all__ = ["naive_bayes_move", "fused_step_for"]


@njit(cache=True, nogil=True)
def _row_cums(theta, I, J, off, Jmax):
    """``cumsum(p)`` ``(I,)`` and ``C[k, y, :J_k] = cumsum(q_k[y])`` ``(K, I, Jmax)`` (``theta``
    as in the module docstring; ``off[k]`` the start of table ``k``)."""
    K = J.shape[0]
    c = np.cumsum(theta[:I])
    C = np.zeros((K, I, Jmax))
    for kk in range(K):
        for y in range(I):
            st = off[kk] + y * J[kk]
            acc = 0.0
            for j in range(J[kk]):
                acc += theta[st + j]
                C[kk, y, j] = acc
    return c, C


def naive_bayes_move(n_classes: int, levels, class_alpha: np.ndarray):
    """``(dim, innov_width, innovations, from_innovations, to_free, from_free, log_target,
    log_density, fused_step)`` of the compiled move (``log_density`` None: fully non-centred;
    ``fused_step`` the factory :func:`fused_step_for` for this shape) (the tuple ``models._compiled._cached`` turns into a
    ``CompiledInterweave``); ``class_alpha`` ``(I,)``, ``levels`` ``(K,)`` ints ``J_k``."""
    I = int(n_classes)
    J = np.ascontiguousarray(levels, dtype=np.int64)
    K = int(J.shape[0])
    Jmax = int(J.max())
    off = np.zeros(K, dtype=np.int64)   # start of table k in theta
    off[0] = I
    for kk in range(1, K):
        off[kk] = off[kk - 1] + I * J[kk - 1]
    alpha = np.ascontiguousarray(class_alpha, dtype=np.float64)

    @njit(cache=True, nogil=True)
    def innovations(theta, records, u, rng):
        c, C = _row_cums(theta, I, J, off, Jmax)
        n = records.shape[0]
        for i in range(n):
            y = int(records[i, 0])
            hi = c[y]
            lo = c[y - 1] if y > 0 else 0.0
            w = min(lo + (1.0 - rng.random()) * (hi - lo), hi)
            u[i, 0] = w if w > lo else hi
        for kk in range(K):
            for i in range(n):
                y = int(records[i, 0])
                x = int(records[i, kk + 1])
                hi = C[kk, y, x]
                lo = C[kk, y, x - 1] if x > 0 else 0.0
                w = min(lo + (1.0 - rng.random()) * (hi - lo), hi)
                u[i, kk + 1] = w if w > lo else hi

    @njit(cache=True, nogil=True)
    def from_innovations(theta, u, out):
        c, C = _row_cums(theta, I, J, off, Jmax)
        for i in range(u.shape[0]):
            y = int(np.searchsorted(c, u[i, 0]))     # side="left": min{y : c_y >= u}
            if y > I - 1:
                y = I - 1
            out[i, 0] = float(y)
            for kk in range(K):
                cnt = 0
                for j in range(J[kk]):
                    if C[kk, y, j] < u[i, kk + 1]:
                        cnt += 1
                out[i, kk + 1] = float(min(cnt, J[kk] - 1))

    @njit(cache=True, nogil=True)
    def to_free(theta, v):
        _alr_to_free(theta, v, I)

    @njit(cache=True, nogil=True)
    def from_free(theta, v, out):
        for a in range(theta.shape[0]):      # the feature tables are not moved
            out[a] = theta[a]
        _alr_from_free(v, out, I)

    @njit(cache=True, nogil=True)
    def log_target(theta):
        return _dirichlet_alr_log_target(theta, alpha, I)

    return (I - 1, K + 1, innovations, from_innovations, to_free, from_free, log_target, None,
            partial(fused_step_for, n_classes=I, levels=J))


# ---- the fused step: records, NaiveBayesCounts contributions and T in one pass -------------
_FUSED_CACHE: dict = {}


def fused_step_for(query, n_classes: int, levels):
    """The :class:`~privpost.inference._damcmc_fast.CompiledInterweave` ``fused_step`` of the
    naive-Bayes move for ``query``: a Numba ``step(theta, u, out, t_out, T_out) -> float`` when
    ``query`` is a ``NaiveBayesCounts`` with ``n_classes`` classes and feature levels ``levels``
    (the model's), else ``None``.

    With ``m = u.shape[0]`` records, ``d = I sum_k J_k`` released cells and ``a_k`` the start of
    table ``k`` in the released vector (the query's ``(k, i, j)`` row-major layout), one pass
    fills ``out`` ``(m, K + 1)`` with ``from_innovations(theta, u)`` (the same comparisons, so
    the same records), ``t_out`` ``(m, d)`` with their contributions (row ``r``: ones at
    ``a_k + y_r J_k + x_rk``, zeros elsewhere) and ``T_out`` ``(d,)`` with the column sums,
    counted; returns 0.0 (the move is fully non-centred: ``log p(u | theta)`` is free of theta).
    Checked against the three passes by ``resolve_fast_path``'s validation and
    tests/test_nb_record_path.py."""
    if getattr(query, "name", None) != "naive_bayes_counts":
        return None
    try:
        I = int(n_classes)
        J = np.ascontiguousarray(levels, dtype=np.int64)
        if int(query.n_classes) != I or tuple(int(v) for v in query.n_levels) != tuple(
                int(v) for v in J):
            return None
    except (AttributeError, TypeError, ValueError):
        return None
    key = (I, J.tobytes())
    if key not in _FUSED_CACHE:
        K = int(J.shape[0])
        Jmax = int(J.max())
        off = np.zeros(K, dtype=np.int64)   # start of table k in theta (after p)
        off[0] = I
        for kk in range(1, K):
            off[kk] = off[kk - 1] + I * J[kk - 1]
        qoff = off - I                      # start of table k in the released vector

        @njit(cache=True, nogil=True)
        def step(theta, u, out, t_out, T_out):
            c, C = _row_cums(theta, I, J, off, Jmax)
            m = u.shape[0]
            d = T_out.shape[0]
            for a in range(d):
                T_out[a] = 0.0
            for i in range(m):
                y = int(np.searchsorted(c, u[i, 0]))     # as from_innovations
                if y > I - 1:
                    y = I - 1
                out[i, 0] = float(y)
                for a in range(d):
                    t_out[i, a] = 0.0
                for kk in range(K):
                    cnt = 0
                    for j in range(J[kk]):
                        if C[kk, y, j] < u[i, kk + 1]:
                            cnt += 1
                    x = min(cnt, J[kk] - 1)
                    out[i, kk + 1] = float(x)
                    cell = qoff[kk] + y * J[kk] + x
                    t_out[i, cell] = 1.0
                    T_out[cell] += 1.0
            return 0.0

        _FUSED_CACHE[key] = step
    return _FUSED_CACHE[key]
