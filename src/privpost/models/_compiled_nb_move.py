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
  some ``p_i <= 0``); the tables' prior does not change under the move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from privpost.models._alr import _alr_from_free, _alr_to_free, _dirichlet_alr_log_target

__all__ = ["naive_bayes_move"]


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
    """``(dim, innov_width, innovations, from_innovations, to_free, from_free, log_target)`` of
    the compiled move (the tuple ``models._compiled._cached`` turns into a
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
            # min{y : c_y >= u} (searchsorted, side="left") = #{y : c_y < u} for the
            # nondecreasing c, counted without a data-dependent branch
            y = 0
            for a in range(I):
                y += c[a] < u[i, 0]
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

    return (I - 1, K + 1, innovations, from_innovations, to_free, from_free, log_target)
