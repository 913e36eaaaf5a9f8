"""The optional compiled protocol of DA-MCMC and its fully compiled chain driver.

At small ``n`` one DA-MCMC iteration is dominated by Python overhead (a conjugate update and a
few NumPy calls cost tens of microseconds, while the ``n`` record updates cost well under one).
A model and a query can remove that overhead by exposing Numba-compiled versions of the three
functions the sampler needs; the whole chain then runs in one compiled loop
(``docs/internals.md``, "Compiled fast path for DA-MCMC"):

* ``model.compiled_model() -> CompiledModel | None`` with
  ``update(theta, records, rng) -> None`` (in place; a kernel invariant for ``p(theta | x)``)
  and ``simulate(theta, out, rng) -> None`` (fill ``out`` with i.i.d. records from
  ``f(. | theta)``);
* ``query.compiled_t() -> contrib | None`` with ``contrib(records, out) -> None`` (fill ``out``
  ``(m, d)`` with the contributions). Built-in queries without the method get a compiled
  contribution from this module (:func:`builtin_contrib`);
* optionally ``CompiledModel.interweave`` (:class:`CompiledInterweave`): the model's
  non-centred protocol compiled, so that the driver runs damcmc's interweaving theta-move
  itself (:func:`_interweave`, same move and adaptation as the generic path).

The driver receives these functions as first-class function values of fixed signatures
(``SIG_*``), so its machine code is shared by every model and cached on disk; only the model's
and the query's own functions compile per process.

Conventions: ``theta`` is a float64 vector, the concatenation of ``params[name].ravel()`` in the
order of ``model.param_shapes``; ``records`` is a float64 ``(m, record_width)`` C-contiguous
array holding the model's records (``np.asarray(records, float64).reshape(m, record_width)``,
same column order); ``rng`` is a :class:`numpy.random.Generator` (Numba supports its methods and
advances the same stream). Before sampling, :func:`resolve_fast_path` checks the compiled
functions against the Python ``simulate`` and ``query.t`` on a few records and falls back to the
generic path (with a warning) if they disagree.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np
from numba import njit, types

from privpost.errors import IncompatibleError
from privpost.inference._kernels import log_g_change, sweep_cells, sweep_l1, sweep_l2
from privpost.models._numeric import chol_lower

__all__ = ["CompiledModel", "CompiledInterweave", "FastPath", "resolve_fast_path", "builtin_contrib",
           "builtin_cells", "CompiledChain", "pack_params", "unpack_params"]


# ---- explicit signatures: the driver takes the model's and the query's functions as
# first-class function values (``numba.types.FunctionType``), not as dispatchers, so that its
# machine code does not depend on which functions it is given and is cached on disk
# (``cache=True``); a dispatcher's own type is the dispatcher object, which no cache can key on.
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_I1 = types.int64[::1]
_I2 = types.int64[:, ::1]
_RNG = types.NumPyRandomGeneratorType("NumPyRandomGeneratorType")
#: ``update(theta, records, rng)`` and ``simulate(theta, out, rng)``
SIG_UPDATE = SIG_SIMULATE = types.void(_F1, _F2, _RNG)
#: ``contrib(records, out)``
SIG_CONTRIB = types.void(_F2, _F2)
#: ``cells(records, out)``: the one-hot contributions' cells, ``out`` (m, K) int64
SIG_CELLS = types.void(_F2, _I2)
#: ``innovations(theta, records, u, rng)``, ``from_innovations(theta, u, out)``,
#: ``to_free(theta, v)``, ``from_free(theta, v, out)``, ``log_target(theta) -> float``
SIG_INNOVATIONS = types.void(_F1, _F2, _F2, _RNG)
SIG_FROM_INNOVATIONS = types.void(_F1, _F2, _F2)
SIG_TO_FREE = types.void(_F1, _F1)
SIG_FROM_FREE = types.void(_F1, _F1, _F1)
SIG_LOG_TARGET = types.float64(_F1)
#: ``log_density(theta, u) -> float``
SIG_LOG_DENSITY = types.float64(_F1, _F2)
_IW_SIGS = (SIG_INNOVATIONS, SIG_FROM_INNOVATIONS, SIG_TO_FREE, SIG_FROM_FREE, SIG_LOG_TARGET,
            SIG_LOG_DENSITY)
#: ``fused_step(theta, u, out, t_out, T_out) -> float`` (CompiledInterweave.fused_step)
SIG_FUSED = types.float64(_F1, _F2, _F2, _F2, _F1)


def as_function(fn, sig):
    """``fn`` (a Numba dispatcher) compiled for ``sig``, ready to be passed to the driver as a
    first-class function. Raises :class:`IncompatibleError` when it cannot be."""
    compile_ = getattr(fn, "compile", None)
    if not callable(compile_):
        raise IncompatibleError(f"{fn!r} is not a numba.njit function")
    try:
        compile_(sig.args)
    except Exception as exc:  # noqa: BLE001 - any typing error means "not usable"
        raise IncompatibleError(f"{getattr(fn, '__name__', fn)!r} does not compile for "
                                f"{sig}: {str(exc).splitlines()[0]}") from None
    return fn


class CompiledModel(NamedTuple):
    """What ``Model.compiled_model()`` returns (all functions ``numba.njit``-compiled).

    Attributes
    ----------
    record_width : int
        Columns of the float64 record array the compiled functions use (1 for scalar records).
    update : dispatcher
        ``update(theta: float64[:], records: float64[:, :], rng) -> None``: overwrite ``theta``
        with one draw of a kernel invariant for ``p(theta | records)`` (same law as the model's
        Python ``update``). ``records`` are on the original, unclamped scale.
    simulate : dispatcher
        ``simulate(theta: float64[:], out: float64[:, :], rng) -> None``: fill ``out`` (m rows)
        with i.i.d. records from ``f(. | theta)`` (same law as the Python ``simulate``).
    """

    record_width: int
    update: Callable[..., Any]
    simulate: Callable[..., Any]
    interweave: "CompiledInterweave | None" = None


class CompiledInterweave(NamedTuple):
    """Compiled non-centred protocol of a model (``CompiledModel.interweave``): the compiled
    driver's version of ``innovations`` / ``from_innovations`` / ``log_prior`` (+ the optional
    free coordinates) that the generic path's interweaving move uses (``docs/internals.md``).

    Attributes
    ----------
    dim : int
        Number of free coordinates ``v`` the random walk moves.
    innov_width : int
        Columns of the float64 innovations array ``u`` ``(m, innov_width)``.
    innovations : dispatcher
        ``innovations(theta, records, u, rng) -> None``: fill ``u`` with a draw of
        ``u | x, theta`` (deterministic for continuous records; same Generator calls as the
        Python ``innovations``).
    from_innovations : dispatcher
        ``from_innovations(theta, u, out) -> None``: fill ``out`` ``(m, record_width)`` with the
        records ``x = g(theta, u)``.
    to_free : dispatcher
        ``to_free(theta, v) -> None``: the free coordinates ``v`` ``(dim,)`` of the moved
        parameters (the moved entries themselves when the model has no free coordinates).
    from_free : dispatcher
        ``from_free(theta, v, out) -> None``: ``out`` = ``theta`` with the moved parameters set
        from ``v`` (the other entries copied).
    log_target : dispatcher
        ``log_target(theta) -> float``: ``log_prior(theta) + log |d theta / d v|`` up to an
        additive constant that does not depend on the moved parameters; ``-inf`` outside the
        support.
    log_density : dispatcher or None
        ``log_density(theta, u) -> float``: ``log p(u | theta)`` up to an additive constant free
        of theta, for a *partially* non-centred parametrisation (the law of ``u`` depends on
        theta; the model's Python ``innovations_log_density``), added to the move's acceptance
        ratio; ``-inf`` outside the support. ``None`` (default): the law of ``u`` is free of
        theta (fully non-centred), the term is 0.
    fused_step : callable or None
        Optional, a plain Python factory ``fused_step(query) -> dispatcher | None``: for the
        queries it knows, a compiled ``step(theta, u, out, t_out, T_out) -> float`` that does a
        move step's three passes in one: ``out`` ``(m, record_width)`` = the records
        ``from_innovations(theta, u)`` (bit-identical), ``t_out`` ``(m, d)`` = the query's
        contributions of ``out`` (up to rounding), ``T_out`` ``(d,)`` = their column sums, and
        the return value ``log_density(theta, u)`` (up to rounding; ``-inf`` outside the
        support). :func:`resolve_fast_path` checks it against the three passes and the driver
        then uses it; ``None`` (default) or a ``None`` from the factory: the three passes.
    """

    dim: int
    innov_width: int
    innovations: Callable[..., Any]
    from_innovations: Callable[..., Any]
    to_free: Callable[..., Any]
    from_free: Callable[..., Any]
    log_target: Callable[..., Any]
    log_density: Callable[..., Any] | None = None
    fused_step: Callable[..., Any] | None = None


# ============================================================================================
# parameter vector <-> dict
# ============================================================================================

def pack_params(params: dict, shapes: dict) -> np.ndarray:
    """Concatenate ``params[name].ravel()`` in ``shapes`` order (float64)."""
    return np.concatenate([np.asarray(params[k], dtype=np.float64).reshape(-1) for k in shapes]) \
        if shapes else np.empty(0)


def unpack_params(theta: np.ndarray, shapes: dict) -> dict:
    """Inverse of :func:`pack_params`; ``theta`` may carry leading axes (``(..., P)``)."""
    out, pos = {}, 0
    lead = theta.shape[:-1]
    for k, shp in shapes.items():
        size = int(np.prod(shp, dtype=np.int64))
        out[k] = theta[..., pos:pos + size].reshape(lead + tuple(shp)).copy()
        pos += size
    return out


# ============================================================================================
# built-in compiled contributions (validated against query.t before use)
# ============================================================================================

def _make_clamp(lo: float, hi: float, factor: float):
    @njit(cache=True, nogil=True)
    def contrib(rec, out):
        for r in range(rec.shape[0]):
            v = rec[r, 0]
            if v < lo:
                v = lo
            elif v > hi:
                v = hi
            out[r, 0] = v * factor
    return contrib


def _make_histogram(k: int):
    @njit(cache=True, nogil=True)
    def contrib(rec, out):
        for r in range(rec.shape[0]):
            for j in range(k):
                out[r, j] = 0.0
            out[r, int(rec[r, 0])] = 1.0
    return contrib


def _make_regression(lo: np.ndarray, hi: np.ndarray, iu0: np.ndarray, iu1: np.ndarray):
    lo = np.ascontiguousarray(lo, dtype=np.float64)
    hi = np.ascontiguousarray(hi, dtype=np.float64)
    iu0 = np.ascontiguousarray(iu0, dtype=np.int64)
    iu1 = np.ascontiguousarray(iu1, dtype=np.int64)
    q = lo.shape[0]          # p + 1 fields: x_1..x_p, y
    ne = iu0.shape[0]

    @njit(cache=True, nogil=True)
    def contrib(rec, out):
        xt = np.empty(q)
        for r in range(rec.shape[0]):
            xt[0] = 1.0
            yt = 0.0
            for c in range(q):
                v = rec[r, c]
                if v < lo[c]:
                    v = lo[c]
                elif v > hi[c]:
                    v = hi[c]
                z = 2.0 * (v - lo[c]) / (hi[c] - lo[c]) - 1.0
                if c < q - 1:
                    xt[c + 1] = z
                else:
                    yt = z
            for j in range(q):
                out[r, j] = xt[j] * yt
            out[r, q] = yt * yt
            for e in range(ne):
                out[r, q + 1 + e] = xt[iu0[e]] * xt[iu1[e]]
    return contrib


def _make_naive_bayes(offsets: np.ndarray, levels: np.ndarray, d: int):
    """Records ``(m, K+1)`` = ``[y, x_1..x_K]``: one count in cell ``offset_k + y J_k + x_k``
    of every feature table (NaiveBayesCounts' ``(k, i, j)`` row-major layout)."""
    K = levels.shape[0]

    @njit(cache=True, nogil=True)
    def contrib(rec, out):
        for r in range(rec.shape[0]):
            for j in range(d):
                out[r, j] = 0.0
            y = int(rec[r, 0])
            for k in range(K):
                out[r, offsets[k] + y * levels[k] + int(rec[r, k + 1])] = 1.0
    return contrib


def _make_naive_bayes_cells(offsets: np.ndarray, levels: np.ndarray):
    """Cells of :func:`_make_naive_bayes`'s contributions: ``out[r, k] = offset_k + y J_k +
    x_k``, one per feature table (the tables are disjoint blocks of the released vector)."""
    K = levels.shape[0]

    @njit(cache=True, nogil=True)
    def cells(rec, out):
        for r in range(rec.shape[0]):
            y = int(rec[r, 0])
            for k in range(K):
                out[r, k] = offsets[k] + y * levels[k] + int(rec[r, k + 1])
    return cells


@njit(cache=True, nogil=True)
def _histogram_cells(rec, out):
    """Cells of :func:`_make_histogram`'s contributions: ``out[r, 0] = category``."""
    for r in range(rec.shape[0]):
        out[r, 0] = int(rec[r, 0])


@njit(cache=True, nogil=True)
def _no_cells(rec, out):
    """The ``cells`` argument of a driver run on dense contributions (never called:
    ``use_cells`` False)."""
    return


_CONTRIB_CACHE: dict = {}
_CELLS_CACHE: dict = {}


def builtin_cells(query):
    """``(cells, K)`` for the built-in one-hot count queries, or ``None``: a compiled
    ``cells(records (m, w) float64, out (m, K) int64)`` giving the K coordinates where a record's
    contribution is 1 (it is 0 elsewhere), position ``k`` ranging over its own block of
    coordinates, disjoint from the others' -- what :func:`~privpost.inference._kernels.
    sweep_cells` needs. ``NaiveBayesCounts``: K = its number of features (one cell per table);
    ``Histogram``: K = 1. Checked against the compiled contributions by :func:`_validate`."""
    name = getattr(query, "name", None)
    try:
        if name == "naive_bayes_counts":
            n_cls = int(query.n_classes)
            levels = np.asarray(query.n_levels, dtype=np.int64)
            offsets = np.concatenate([[0], np.cumsum(n_cls * levels)[:-1]]).astype(np.int64)
            key = ("naive-bayes", n_cls, levels.tobytes())
            if key not in _CELLS_CACHE:
                _CELLS_CACHE[key] = (_make_naive_bayes_cells(offsets, levels), int(levels.shape[0]))
            return _CELLS_CACHE[key]
        if name == "histogram":
            int(query.categories)
            return _histogram_cells, 1
    except (AttributeError, TypeError, ValueError):
        return None
    return None


def builtin_contrib(query):
    """A compiled ``contrib(records, out)`` for built-in queries, or ``None``.

    Cached per query parameters: the chain driver is compiled once per distinct function, so
    returning the same dispatcher for equal queries avoids recompiling it.
    """
    name = getattr(query, "name", None)
    try:
        if name in ("sum", "mean"):
            lo, hi = (float(v) for v in query.bounds)
            factor = 1.0 if name == "sum" else 1.0 / float(query.n)
            key = ("clamp", lo, hi, factor)
            make = lambda: _make_clamp(lo, hi, factor)  # noqa: E731
        elif name == "histogram":
            key = ("histogram", int(query.categories))
            make = lambda: _make_histogram(int(query.categories))  # noqa: E731
        elif name == "regression_stats":
            # public parameters only; layout documented in RegressionStats' docstring
            bx = [tuple(map(float, b)) for b in query.bounds_x]
            by = tuple(map(float, query.bounds_y))
            lo = np.array([b[0] for b in bx] + [by[0]])
            hi = np.array([b[1] for b in bx] + [by[1]])
            iu0, iu1 = np.triu_indices(len(bx) + 1)
            keep = ~((iu0 == 0) & (iu1 == 0))
            iu0, iu1 = iu0[keep].astype(np.int64), iu1[keep].astype(np.int64)
            key = ("regression", lo.tobytes(), hi.tobytes())
            make = lambda: _make_regression(lo, hi, iu0, iu1)  # noqa: E731
        elif name == "naive_bayes_counts":
            n_cls = int(query.n_classes)
            levels = np.asarray(query.n_levels, dtype=np.int64)
            offsets = np.concatenate([[0], np.cumsum(n_cls * levels)[:-1]]).astype(np.int64)
            key = ("naive-bayes", n_cls, levels.tobytes())
            make = lambda: _make_naive_bayes(offsets, levels, int(n_cls * levels.sum()))  # noqa: E731
        else:
            return None
    except (AttributeError, TypeError, ValueError):
        return None
    if key not in _CONTRIB_CACHE:
        _CONTRIB_CACHE[key] = make()
    return _CONTRIB_CACHE[key]


# ============================================================================================
# the compiled chain driver
# ============================================================================================

# ---- the non-centred (interweaving) theta-move, compiled -----------------------------------
# Same move, same Generator calls and same warm-up adaptation as the generic path
# (damcmc.Sampler._interweave and damcmc._IWState): a random walk v* = v + s C z on the model's
# free coordinates with the innovations u held fixed, accepted with
# p(v*) eta(s | T(g(theta*, u))) / (p(v) eta(s | T)); s (log_s) and C (chol) adapt during
# warm-up only and are frozen afterwards, so the post-warm-up kernel is a fixed exact MH kernel.
# iw_f = [log_s, target acceptance]; iw_i = [adapting steps, switched to the covariance,
# proposals after warm-up, acceptances after warm-up].

@njit(cache=True, nogil=True)
def _log_g(T, s_obs, weight, use_l2):
    out = 0.0
    for c in range(T.shape[0]):
        r = s_obs[c] - T[c]
        if use_l2:
            out -= weight[c] * r * r
        else:
            out -= weight[c] * abs(r)
    return out


@njit(cache=True, nogil=True)
def _iw_propose(dim, v, iw_f, chol, z, vp, rng):
    """The adapted random-walk proposal that :func:`_iw_adapt` tunes, shared by every compiled
    non-centred move: ``z[:dim] ~ N(0, I)`` (``dim`` draws of ``rng``, in order), then ``vp[:dim]
    = v + exp(iw_f[0]) chol z`` (``chol`` lower triangular, (dim, dim)). Symmetric in ``v`` and
    ``vp``, so it adds no term to an MH ratio."""
    for a in range(dim):
        z[a] = rng.standard_normal()
    sc = math.exp(iw_f[0])
    for a in range(dim):
        acc = 0.0
        for b in range(a + 1):
            acc += chol[a, b] * z[b]
        vp[a] = v[a] + sc * acc


@njit(cache=True, nogil=True)
def _iw_adapt(v, alpha, iw_f, iw_i, mean, m2, chol):
    """One Robbins--Monro / running-covariance step (damcmc._IWState.adapt, compiled)."""
    dim = v.shape[0]
    iw_i[0] += 1
    t = iw_i[0]
    iw_f[0] += (alpha - iw_f[1]) * min(1.0, 5.0 * float(t) ** -0.6)
    iw_f[0] = min(max(iw_f[0], -30.0), 10.0)
    delta = np.empty(dim)
    for a in range(dim):
        delta[a] = v[a] - mean[a]
        mean[a] += delta[a] / t
    for a in range(dim):
        for b in range(dim):
            m2[a, b] += delta[a] * (v[b] - mean[b])
    if t >= max(20, 5 * dim) and (iw_i[1] == 0 or t % 50 == 0):
        cov = m2 / (t - 1)
        tr = 0.0
        for a in range(dim):
            tr += cov[a, a]
        ridge = 1e-10 * max(tr / dim, 1e-300)
        for a in range(dim):
            cov[a, a] += ridge
        L = chol_lower(cov)
        anypos = False
        for a in range(dim):
            for b in range(dim):
                if not np.isfinite(L[a, b]):
                    return
            if L[a, a] > 0:
                anypos = True
        if not anypos:
            return
        chol[:, :] = L
        if iw_i[1] == 0:
            iw_i[1] = 1
            iw_f[0] = math.log(2.38 / math.sqrt(dim))


@njit(cache=True, nogil=True)
def _zero_log_density(theta, u):
    """``log_density`` of a fully non-centred parametrisation (the law of ``u`` is free of
    theta)."""
    return 0.0


@njit(cache=True, nogil=True)
def _no_fused_step(theta, u, out, t_out, T_out):
    """The ``fused_step`` argument of a driver without one (never called: ``use_fused``
    False)."""
    return 0.0


@njit(cache=True, nogil=True)
def _interweave(innovations, from_innovations, to_free, from_free, log_target, log_density,
                contrib, n_steps, adapting, use_l2, theta, records, t_cur, T, s_obs, weight, rng,
                u, xp, tp, Tp, v, vp, thp, z, iw_f, iw_i, mean, m2, chol, fused, use_fused,
                cells, use_cells, c_buf):
    """``n_steps`` non-centred MH steps (damcmc.Sampler._interweave, compiled); with
    ``use_fused`` a proposal's records, contributions, their sum and ``log_density`` come from
    one call of ``fused`` (:class:`CompiledInterweave` ``fused_step``), else from three
    passes. With ``use_cells`` (one-hot count queries, :func:`builtin_cells`; takes precedence
    over ``use_fused``) the proposal's sum is counted from its records' cells (``c_buf``
    (n, K) int64) and the dense contributions ``t_cur`` are left alone (the driver does not
    keep them in that mode)."""
    n, d = t_cur.shape
    dim = v.shape[0]
    innovations(theta, records, u, rng)
    to_free(theta, v)
    lp = log_target(theta) + log_density(theta, u)
    moved = False
    for _ in range(n_steps):
        _iw_propose(dim, v, iw_f, chol, z, vp, rng)
        log_v = math.log1p(-rng.random())
        from_free(theta, vp, thp)
        lpp = log_target(thp)
        if lpp > -np.inf:
            if use_fused and not use_cells:
                lpp += fused(thp, u, xp, tp, Tp)
            else:
                lpp += log_density(thp, u)
        alpha = 0.0
        if lpp > -np.inf:
            if use_cells:
                from_innovations(thp, u, xp)
                cells(xp, c_buf)
                for c in range(d):
                    Tp[c] = 0.0
                for i in range(n):
                    for q in range(c_buf.shape[1]):
                        Tp[c_buf[i, q]] += 1.0
            elif not use_fused:
                from_innovations(thp, u, xp)
                contrib(xp, tp)
                for c in range(d):
                    acc = 0.0
                    for i in range(n):
                        acc += tp[i, c]
                    Tp[c] = acc
            # log g(s, Tp) - log g(s, T) from the residuals (cancellation-free, _kernels)
            log_a = lpp - lp + log_g_change(T, Tp, s_obs, weight, use_l2)
            if log_a != log_a:
                log_a = -np.inf
            alpha = 1.0 if log_a >= 0 else math.exp(log_a)
            if log_v < log_a:
                for a in range(theta.shape[0]):
                    theta[a] = thp[a]
                for a in range(dim):
                    v[a] = vp[a]
                lp = lpp
                records[:, :] = xp
                if not use_cells:
                    t_cur[:, :] = tp
                for c in range(d):
                    T[c] = Tp[c]
                moved = True
                if not adapting:
                    iw_i[3] += 1
        if adapting:
            _iw_adapt(v, alpha, iw_f, iw_i, mean, m2, chol)
        else:
            iw_i[2] += 1
    return moved


def _drive_sig(with_iw: bool):
    ft = types.FunctionType
    iw = ([ft(sig) for sig in _IW_SIGS + (SIG_FUSED,)] if with_iw
          else [types.none] * (len(_IW_SIGS) + 1))
    b1 = types.boolean[::1]
    return types.void(
        ft(SIG_UPDATE), ft(SIG_SIMULATE), ft(SIG_CONTRIB), types.boolean,
        _F1, _F2, _F2, _F2, _F2, _F1, _F1, _F1, _F1, b1, _I1, _I1, _RNG,      # theta .. rng
        types.int64, types.int64, types.int64, types.float64, types.int64,    # n_iter .. recompute
        _F2, _F1, _F1, _F1, _I1, _F1,                                         # stores, ictr, fctr
        *iw, types.int64, _F2, _F2, _F2, _F1, _F1, _F1, _F1, _F1, _F1, _I1, _F1, _F2, _F2,
        types.boolean, ft(SIG_CELLS), types.boolean, _I2, _I2)


def _driver():
    """The chain driver compiled for its two signatures (with and without the non-centred
    move), loaded from Numba's on-disk cache after the first time (any process)."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = njit([_drive_sig(False), _drive_sig(True)], cache=True, nogil=True)(_drive)
    return _DRIVER


_DRIVER = None


def _drive(update, simulate, contrib, use_l2, theta, records, prop, t_cur, t_prop, T, s_obs,
           weight, log_u, accept, record_counts, sweep_counts, rng, n_iter, warmup, thin,
           log_const, recompute_every, store_theta, store_rate, store_min, store_log_eta,
           ictr, fctr, iw_innovations, iw_from_innovations, iw_to_free, iw_from_free,
           iw_log_target, iw_log_density, iw_fused, n_iw, iw_u, iw_xp, iw_tp, iw_Tp, iw_v, iw_vp,
           iw_thp, iw_z, iw_f, iw_i, iw_mean, iw_m2, iw_chol, iw_use_fused, cells, use_cells,
           c_cur, c_prop):
    """Run ``n_iter`` DA-MCMC iterations (Algorithm 1) entirely in compiled code.

    With ``use_cells`` (one-hot count queries, :func:`builtin_cells`) the record sweep works on
    the cells of the current records and of the proposals (``c_cur`` (n, K), ``c_prop``
    (k*n, K) int64; :func:`~privpost.inference._kernels.sweep_cells`) instead of their dense
    ``(n, d)`` contributions: same Generator calls, same acceptance ratios up to the order of
    summation, O(K) instead of O(d) per record.

    ``ictr = [iteration, n_stored]``, ``fctr = [running block minimum, max drift of T]``.
    With the ``iw_*`` functions of :class:`CompiledInterweave` (``None`` for none: the branch is
    pruned at compile time) every iteration runs ``n_iw`` non-centred theta-moves after
    ``update`` (:func:`_interweave`; adapted while ``iteration < warmup``).
    """
    n, d = t_cur.shape
    m = t_prop.shape[0]
    k = m // n
    rw = records.shape[1]
    empty = np.empty(0)
    inv_n = 1.0 / n
    for _ in range(n_iter):
        it = ictr[0]
        if it == warmup:
            record_counts[:] = 0
        update(theta, records, rng)
        if iw_innovations is not None:   # pruned at compile time for the centred driver
            _interweave(iw_innovations, iw_from_innovations, iw_to_free, iw_from_free,
                        iw_log_target, iw_log_density, contrib, n_iw, it < warmup, use_l2, theta, records,
                        t_cur, T, s_obs, weight, rng, iw_u, iw_xp, iw_tp, iw_Tp, iw_v, iw_vp,
                        iw_thp, iw_z, iw_f, iw_i, iw_mean, iw_m2, iw_chol, iw_fused, iw_use_fused,
                        cells, use_cells, c_cur)
        simulate(theta, prop, rng)
        if use_cells:
            cells(records, c_cur)
            cells(prop, c_prop)
        else:
            contrib(prop, t_prop)
        for r in range(m):
            log_u[r] = -rng.standard_exponential()
        if use_cells:
            nacc = sweep_cells(use_l2, T, s_obs, c_cur, c_prop, log_u, weight, accept,
                               record_counts, sweep_counts)
        elif use_l2:
            nacc = sweep_l2(T, s_obs, t_cur, t_prop, empty, log_u, weight, accept,
                            record_counts, sweep_counts)
        else:
            nacc = sweep_l1(T, s_obs, t_cur, t_prop, empty, log_u, weight, accept,
                            record_counts, sweep_counts)
        if nacc > 0:
            for r in range(m):
                if accept[r]:
                    i = r % n
                    for c in range(rw):
                        records[i, c] = prop[r, c]
        if it >= warmup:
            mn = sweep_counts[0]
            for s in range(1, k):
                if sweep_counts[s] < mn:
                    mn = sweep_counts[s]
            fmin = mn * inv_n
            if fmin < fctr[0]:
                fctr[0] = fmin
            if (it - warmup) % thin == thin - 1:
                j = ictr[1]
                for c in range(theta.shape[0]):
                    store_theta[j, c] = theta[c]
                store_rate[j] = nacc / m
                store_min[j] = fctr[0]
                store_log_eta[j] = log_const + _log_g(T, s_obs, weight, use_l2)
                fctr[0] = np.inf
                ictr[1] = j + 1
        if recompute_every > 0 and (it + 1) % recompute_every == 0:
            contrib(records, t_cur)
            for c in range(d):
                acc = 0.0
                for i in range(n):
                    acc += t_cur[i, c]
                drift = abs(acc - T[c])
                if drift > fctr[1]:
                    fctr[1] = drift
                T[c] = acc
        ictr[0] = it + 1


class FastPath:
    """A validated compiled model + compiled contribution for one (model, query) pair.

    The functions are compiled for the driver's explicit signatures (:func:`as_function`;
    raises :class:`IncompatibleError` when one does not compile for its signature).
    """

    def __init__(self, cm: CompiledModel, contrib, source: str, query=None):
        self.cm = cm._replace(update=as_function(cm.update, SIG_UPDATE),
                              simulate=as_function(cm.simulate, SIG_SIMULATE))
        if cm.interweave is not None:
            civ = cm.interweave
            if civ.log_density is None:
                civ = civ._replace(log_density=_zero_log_density)
            fns = [as_function(fn, sig) for fn, sig in zip(civ[2:], _IW_SIGS)]
            self.cm = self.cm._replace(interweave=civ._replace(
                innovations=fns[0], from_innovations=fns[1], to_free=fns[2], from_free=fns[3],
                log_target=fns[4], log_density=fns[5]))
        self.contrib = as_function(contrib, SIG_CONTRIB)
        self.source = source
        #: ``(cells, K)`` of a one-hot count query (:func:`builtin_cells`) or None; checked
        #: against ``contrib`` by :func:`_validate` (None there when they disagree)
        found = builtin_cells(query) if query is not None else None
        self.cells = (as_function(found[0], SIG_CELLS), found[1]) if found is not None else None
        #: the model's fused move step for this query (``CompiledInterweave.fused_step``) or
        #: None; checked against the three passes by :func:`_validate_interweave`
        self.fused = None
        factory = getattr(cm.interweave, "fused_step", None) if cm.interweave is not None else None
        if factory is not None and query is not None:
            step = factory(query)
            self.fused = as_function(step, SIG_FUSED) if step is not None else None


class CompiledChain:
    """One chain on the fully compiled path; same interface as the generic chain."""

    def __init__(self, fast: FastPath, sampler, chain, rng, init, draws, warmup, thin,
                 recompute_every: int = 1000):
        p = sampler.p
        self.fast, self.p, self.chain, self.rng = fast, p, chain, rng
        st = sampler.init(rng, init)   # same initialisation as the generic path
        rw = fast.cm.record_width
        self.theta = pack_params(st.params, p.shapes)
        self.records = np.ascontiguousarray(np.asarray(st.records, dtype=np.float64)
                                            .reshape(p.n, rw))
        self.t_cur = np.zeros((p.n, p.d))
        fast.contrib(self.records, self.t_cur)
        self.T = np.ascontiguousarray(self.t_cur.sum(axis=0))
        m = p.n * p.k
        self.prop = np.zeros((m, rw))
        self.t_prop = np.zeros((m, p.d))
        self.log_u = np.zeros(m)
        self.accept = np.zeros(m, dtype=np.bool_)
        self.record_counts = np.zeros(p.n, dtype=np.int64)
        self.sweep_counts = np.zeros(p.k, dtype=np.int64)
        self.draws, self.warmup, self.thin = draws, warmup, thin
        self.total = warmup + draws * thin
        self.store_theta = np.zeros((draws, self.theta.shape[0]))
        self.store_rate = np.zeros(draws)
        self.store_min = np.zeros(draws)
        self.store_log_eta = np.zeros(draws)
        self.ictr = np.zeros(2, dtype=np.int64)
        self.fctr = np.array([np.inf, 0.0])
        self.recompute_every = recompute_every
        # writable C-contiguous float64 copies (the driver's explicit signature)
        self.s_obs = np.array(p.s_obs, dtype=np.float64, order="C")
        self.weight = np.array(p.weight, dtype=np.float64, order="C").reshape(-1)
        # non-centred move (same proposal state as damcmc._IWState)
        civ = fast.cm.interweave
        self.n_iw = int(p.interweave) if civ is not None else 0
        self.iw = civ if self.n_iw else None
        dim = int(self.iw.dim) if self.n_iw else 1
        uw = int(self.iw.innov_width) if self.n_iw else 1
        nb = p.n if self.n_iw else 1
        self.iw_u = np.zeros((nb, uw))
        self.iw_xp = np.zeros((nb, rw))
        self.iw_tp = np.zeros((nb, p.d))
        self.iw_Tp = np.zeros(p.d)
        self.iw_v = np.zeros(dim)
        self.iw_vp = np.zeros(dim)
        self.iw_thp = np.zeros_like(self.theta)
        self.iw_z = np.zeros(dim)
        self.iw_f = np.array([math.log(0.1), 0.44 if dim == 1 else 0.3])
        self.iw_i = np.zeros(4, dtype=np.int64)
        self.iw_mean = np.zeros(dim)
        self.iw_m2 = np.zeros((dim, dim))
        self.iw_chol = np.eye(dim)
        # one-hot count queries: the sweep on cells (FastPath.cells)
        kc = fast.cells[1] if fast.cells is not None else 1
        self.c_cur = np.zeros((p.n if fast.cells is not None else 1, kc), dtype=np.int64)
        self.c_prop = np.zeros((m if fast.cells is not None else 1, kc), dtype=np.int64)

    @property
    def it(self) -> int:
        return int(self.ictr[0])

    @property
    def n_stored(self) -> int:
        return int(self.ictr[1])

    @property
    def max_drift(self) -> float:
        return float(self.fctr[1])

    def advance(self, n_iter: int) -> None:
        p, f = self.p, self.fast
        _driver()(f.cm.update, f.cm.simulate, f.contrib, p.kernel == "l2", self.theta,
               self.records, self.prop, self.t_cur, self.t_prop, self.T, self.s_obs, self.weight,
               self.log_u, self.accept, self.record_counts, self.sweep_counts, self.rng,
               int(n_iter), int(self.warmup), int(self.thin), float(p.log_const),
               int(self.recompute_every), self.store_theta, self.store_rate, self.store_min,
               self.store_log_eta, self.ictr, self.fctr,
               *(self.iw[2:8] + (f.fused or _no_fused_step,) if self.iw is not None
                 else (None,) * 7), self.n_iw, self.iw_u, self.iw_xp, self.iw_tp, self.iw_Tp,
               self.iw_v, self.iw_vp, self.iw_thp, self.iw_z, self.iw_f, self.iw_i,
               self.iw_mean, self.iw_m2, self.iw_chol, f.fused is not None,
               f.cells[0] if f.cells is not None else _no_cells, f.cells is not None,
               self.c_cur, self.c_prop)
        if f.cells is not None:
            # the driver on cells does not keep the dense contributions: rebuild them once per
            # call, so that between calls t_cur is what it is on the dense path
            f.contrib(self.records, self.t_cur)

    def extend(self, extra: int) -> None:
        """Room for ``extra`` more draws (run-until-converged rounds)."""
        self.store_theta = np.concatenate([self.store_theta,
                                           np.zeros((extra, self.store_theta.shape[1]))])
        for attr in ("store_rate", "store_min", "store_log_eta"):
            setattr(self, attr, np.concatenate([getattr(self, attr), np.zeros(extra)]))
        self.draws += extra
        self.total += extra * self.thin

    def post_sweeps(self) -> int:
        return max(0, self.it - self.warmup) * self.p.k

    def result(self) -> dict:
        j = self.n_stored
        return {"draws": unpack_params(self.store_theta[:j], self.p.shapes),
                "accept_rate": self.store_rate[:j].copy(), "accept_min": self.store_min[:j].copy(),
                "log_eta": self.store_log_eta[:j].copy(),
                "record_counts": self.record_counts.copy(), "post_sweeps": self.post_sweeps(),
                "n_stored": j, "it": self.it, "interweave": self._iw_summary()}

    def _iw_summary(self) -> dict | None:
        if not self.n_iw:
            return None
        prop, acc = int(self.iw_i[2]), int(self.iw_i[3])
        return {"accept_rate": acc / prop if prop else math.nan,
                "scale": math.exp(float(self.iw_f[0])), "chol": self.iw_chol.copy()}


# ============================================================================================
# choosing and validating the fast path
# ============================================================================================

#: ``fast_path="auto"`` compiles only runs with at least this much work, counted as
#: ``chains * iterations * (sweeps_per_iteration * n + 500)`` record updates (500 stands for the
#: per-iteration overhead; damcmc adds 3,600 per NumPy interweaving step): the driver itself is
#: cached on disk, but the model's and the query's functions compile once per process (about as
#: long as this much generic-path work), which a shorter run would not repay.
AUTO_MIN_WORK = 2e7


def resolve_fast_path(problem, fast_path="auto", quiet: bool = False,
                      work: float | None = None) -> FastPath | None:
    """The validated :class:`FastPath` for ``problem``, or ``None`` for the generic path.

    ``fast_path=True`` raises :class:`IncompatibleError` when it is unavailable; ``"auto"``
    chooses the generic path for runs below :data:`AUTO_MIN_WORK` (``work``), falls back silently
    when the model or query lacks the protocol, and with a warning when the compiled functions
    disagree with the Python ones.
    """
    if fast_path is False:
        return None
    required = fast_path is True
    if not required and work is not None and work < AUTO_MIN_WORK:
        return None

    def unavailable(msg):
        if required:
            raise IncompatibleError(f"damcmc fast_path=True: {msg}")
        return None

    if problem.proposal is not None:
        return unavailable("the compiled driver supports model proposals only (no proposal=)")
    getter = getattr(problem.model, "compiled_model", None)
    cm = getter() if callable(getter) else None
    if cm is None:
        return unavailable(f"model {type(problem.model).__name__} has no compiled_model()")
    if getattr(problem, "interweave", 0) and cm.interweave is None:
        return unavailable(f"model {type(problem.model).__name__} has no compiled interweaving "
                           f"move (compiled_model().interweave is None); use interweave=False "
                           f"or fast_path='auto'")
    if getattr(problem, "interweave", 0):
        stale = _overridden_below_compiled(problem.model)
        if stale:
            return unavailable(f"{type(problem.model).__name__} overrides {', '.join(stale)} "
                               f"but inherits compiled_model(): its compiled interweaving move "
                               f"would not be the Python one")
    qget = getattr(problem.query, "compiled_t", None)
    contrib = qget() if callable(qget) else None
    source = "query.compiled_t()"
    if contrib is None:
        contrib = builtin_contrib(problem.query)
        source = "built-in"
    if contrib is None:
        return unavailable(f"query {type(problem.query).__name__} has no compiled_t()")
    try:
        fast = FastPath(cm, contrib, source, problem.query)
        _validate(problem, fast)
    except IncompatibleError as exc:
        if required:
            raise
        if not quiet:
            warnings.warn(f"damcmc: not using the compiled fast path: {exc}", RuntimeWarning,
                          stacklevel=3)
        return None
    return fast


_IW_METHODS = ("innovations", "from_innovations", "log_prior", "interweave_to_free",
               "interweave_from_free", "interweave_log_jacobian", "innovations_log_density")


def _overridden_below_compiled(model) -> list[str]:
    """Non-centred protocol methods a subclass redefines below the class that defines
    ``compiled_model`` (e.g. a deliberately different ``innovations``): the inherited compiled
    move cannot know them, and a random ``innovations`` cannot be checked by value."""
    mro = type(model).__mro__

    def owner(name):
        for k in mro:
            if name in vars(k):
                return k
        return None

    home = owner("compiled_model")
    if home is None:
        return []
    return [nm for nm in _IW_METHODS
            if (k := owner(nm)) is not None and k is not home and issubclass(k, home)]


def _validate(problem, fast: FastPath, m: int = 32) -> None:
    p = problem
    cm = fast.cm
    rw = int(cm.record_width)
    width = int(np.prod(p.rec_tail, dtype=np.int64)) if p.rec_tail else 1
    name = type(p.model).__name__
    if rw != width:
        raise IncompatibleError(f"{name}.compiled_model().record_width = {rw}, but the model's "
                                f"records have {width} column(s)")
    vrng = np.random.default_rng(987654321)
    params = p.model.prior_sample(vrng)
    theta = pack_params(params, p.shapes)
    recs = np.asarray(p.model.simulate(params, m, vrng))
    r2 = np.ascontiguousarray(np.asarray(recs, dtype=np.float64).reshape(m, rw))
    out = np.zeros((m, p.d))
    fast.contrib(r2, out)
    want = p.t(recs)
    if not np.allclose(out, want, rtol=1e-10, atol=1e-12):
        raise IncompatibleError(f"compiled contributions ({fast.source}) disagree with "
                                f"{type(p.query).__name__}.t")
    if fast.cells is not None:      # the cells against the contributions (one-hot, K per row)
        cells, kc = fast.cells
        idx = np.zeros((m, kc), dtype=np.int64)
        cells(r2, idx)
        onehot = np.zeros((m, p.d))
        ok = bool(np.all((idx >= 0) & (idx < p.d)))
        if ok:
            np.add.at(onehot, (np.repeat(np.arange(m), kc), idx.ravel()), 1.0)
        if not (ok and np.array_equal(onehot, out)):
            fast.cells = None          # not one-hot as declared: the dense sweep
    sim = np.zeros((m, rw))
    cm.simulate(theta.copy(), sim, vrng)
    if not np.all(np.isfinite(sim)):
        raise IncompatibleError(f"{name}: compiled simulate produced non-finite records")
    back = sim.reshape((m,) + p.rec_tail).astype(p.rec_dtype)
    out2 = np.zeros((m, p.d))
    fast.contrib(sim, out2)
    if not np.allclose(out2, p.t(back), rtol=1e-10, atol=1e-12):
        raise IncompatibleError(f"{name}: records from the compiled simulate do not have the "
                                f"layout of the Python simulate")
    th = theta.copy()
    cm.update(th, sim, vrng)
    if th.shape != theta.shape or not np.all(np.isfinite(th)):
        raise IncompatibleError(f"{name}: compiled update produced an invalid parameter vector")
    if not math.isfinite(float(p.log_const)):
        raise IncompatibleError("non-finite mechanism constant")
    if getattr(p, "interweave", 0) and cm.interweave is not None:
        _validate_interweave(p, fast, params, recs, vrng)


def _validate_interweave(p, fast: FastPath, params, recs, vrng) -> None:
    """The compiled non-centred functions against the model's Python ones: the round trip
    ``g(theta, u(x)) = x``, the records ``g(theta*, u)`` at a moved theta*, the free
    coordinates and differences of the log target."""
    civ = fast.cm.interweave
    model = p.model
    name = type(model).__name__
    m = recs.shape[0]
    rw = int(fast.cm.record_width)
    theta = pack_params(params, p.shapes)
    r2 = np.ascontiguousarray(np.asarray(recs, dtype=np.float64).reshape(m, rw))
    u = np.zeros((m, int(civ.innov_width)))
    civ.innovations(theta.copy(), r2, u, vrng)
    back = np.zeros((m, rw))
    civ.from_innovations(theta.copy(), u, back)
    if not np.allclose(back, r2, rtol=1e-9, atol=1e-9):
        raise IncompatibleError(f"{name}: compiled from_innovations(innovations(x)) does not "
                                f"reproduce the records x")

    def py_free(prm):
        if p.iw_free:
            return np.asarray(model.interweave_to_free(prm), dtype=np.float64).ravel()
        return np.concatenate([np.asarray(prm[k], dtype=np.float64).ravel()
                               for k in p.iw_names])

    def py_target(prm):
        lp = float(model.log_prior(prm))
        return lp + float(model.interweave_log_jacobian(prm)) if p.iw_free else lp

    v = np.zeros(int(civ.dim))
    civ.to_free(theta.copy(), v)
    if v.shape != py_free(params).shape or not np.allclose(v, py_free(params), rtol=1e-9,
                                                           atol=1e-12):
        raise IncompatibleError(f"{name}: compiled interweave free coordinates disagree with "
                                f"the Python ones")
    vp = v + 0.01 * vrng.standard_normal(v.shape[0])
    thp = np.zeros_like(theta)
    civ.from_free(theta.copy(), vp, thp)
    if p.iw_free:
        prm_p = model.interweave_from_free(params, vp)
    else:
        prm_p = dict(params)
        off = 0
        for k, size in zip(p.iw_names, p.iw_sizes):
            prm_p[k] = vp[off:off + size].reshape(p.shapes[k])
            off += size
    if not np.allclose(thp, pack_params(prm_p, p.shapes), rtol=1e-9, atol=1e-12):
        raise IncompatibleError(f"{name}: compiled interweave from_free disagrees with Python")
    want = py_target(prm_p) - py_target(params)
    got = float(civ.log_target(thp)) - float(civ.log_target(theta.copy()))
    if math.isfinite(want) and not math.isclose(want, got, rel_tol=1e-7, abs_tol=1e-7):
        raise IncompatibleError(f"{name}: compiled interweave log_target differences disagree "
                                f"with log_prior ({got} vs {want})")
    u_py = u.reshape(m) if civ.innov_width == 1 else u.copy()   # the Python layout
    py_density = getattr(model, "innovations_log_density", None)
    want = (float(py_density(prm_p, u_py)) - float(py_density(params, u_py))
            if py_density is not None else 0.0)
    got = float(civ.log_density(thp, u)) - float(civ.log_density(theta.copy(), u))
    if math.isfinite(want) and not math.isclose(want, got, rel_tol=1e-7, abs_tol=1e-7):
        raise IncompatibleError(f"{name}: compiled interweave log_density differences disagree "
                                f"with innovations_log_density ({got} vs {want})")
    want_x = np.asarray(model.from_innovations(prm_p, u_py), dtype=np.float64).reshape(m, rw)
    xp = np.zeros((m, rw))
    civ.from_innovations(thp, u, xp)
    if not np.allclose(xp, want_x, rtol=1e-9, atol=1e-9):
        raise IncompatibleError(f"{name}: compiled from_innovations disagrees with the Python "
                                f"one at a moved parameter")
    if fast.fused is not None:    # the fused step against the three passes it replaces
        tp = np.zeros((m, int(p.d)))
        fast.contrib(xp, tp)
        xf, tf, Tf = np.zeros((m, rw)), np.zeros((m, int(p.d))), np.zeros(int(p.d))
        ld = float(fast.fused(thp, u, xf, tf, Tf))
        ok = (np.array_equal(xf, xp) and np.allclose(tf, tp, rtol=1e-12, atol=1e-15)
              and np.allclose(Tf, tf.sum(axis=0), rtol=1e-12, atol=1e-14)
              and math.isclose(ld, float(civ.log_density(thp, u)), rel_tol=1e-9, abs_tol=1e-9))
        if not ok:
            raise IncompatibleError(f"{name}: the compiled fused move step disagrees with "
                                    f"from_innovations + the query's contributions + log_density")
