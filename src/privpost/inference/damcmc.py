"""Data augmentation MCMC (Ju, Awan, Gong & Rao 2022; seed 000): exact, general and fast.

The sampler targets the augmented posterior ``p(theta, x | s_dp) ∝ p(theta) f(x | theta)
eta(s_dp | x)``, whose ``theta``-marginal is the exact private posterior. One iteration is

1. ``theta <- model.update(theta, x)`` (any kernel invariant for ``p(theta | x)``);
2. ``k = sweeps_per_iteration`` systematic scans over the records: for ``i = 1..n`` propose
   ``x_i*`` and accept with probability
   ``min(1, g(s, T - t(x_i) + t(x_i*)) / g(s, T) * extra_i)``, keeping the running sum
   ``T = sum_i t(x_i)`` of the per-record contributions. With model proposals
   ``x_i* ~ f(. | theta)`` (Algorithm 1) ``extra_i = 1``; with a user proposal ``q``
   (Algorithm 2) ``extra_i = f(x_i*) q(x_i | x_i*) / (f(x_i) q(x_i* | x_i))``.

**Fast path** (``docs/internals.md``; DESIGN §3). Proposals depend only on ``theta`` (Algorithm 1),
so all ``k n`` of them and their contributions are drawn and computed at once by the model's and
the query's vectorised NumPy code; the sequential accept/reject loop runs compiled
(:mod:`privpost.inference._kernels`, one loop per kernel family of the mechanism). Models and
queries that implement the optional *compiled protocol* (``model.compiled_model()``,
``query.compiled_t()``, see ``docs/internals.md``) get a fully compiled chain driver
(:mod:`privpost.inference._damcmc_fast`), which removes the per-iteration Python overhead that
dominates at small ``n``.

Example::

    import privpost as pp
    post = pp.infer(model, release, method="damcmc", draws=2000, warmup=1000, chains=4, seed=1)
    post.summary()

The step-level API (:class:`Sampler`) follows BlackJAX's ``init``/``step`` style and is what the
tests use to check one sweep at a time.
"""

from __future__ import annotations

import inspect
import math
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import warnings
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

import numpy as np

from privpost._rng import as_generator, spawn
from privpost.diagnostics import flag as flag_convergence
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import _kernels, reject_release_set
from privpost.inference._damcmc_fast import CompiledModel, resolve_fast_path

__all__ = ["run", "Sampler", "ChainState", "CompiledModel"]

_EMPTY = np.empty(0)
# Target wall time of one block of iterations between progress updates / interrupt checks.
_BLOCK_SECONDS = 0.1


# ============================================================================================
# problem set-up and validation (done once, never inside the loop)
# ============================================================================================

def _as_observed(release, d: int) -> np.ndarray:
    try:
        s = np.asarray(release.observed, dtype=np.float64)
    except (TypeError, ValueError):
        raise IncompatibleError("release.observed: cannot be read as numbers") from None
    if s.ndim == 0:
        s = s.reshape(1)
    if s.shape != (d,):
        raise IncompatibleError(
            f"release.observed has shape {s.shape} but query {type(release.query).__name__} "
            f"releases d = {d} value(s)")
    if not np.all(np.isfinite(s)):
        raise IncompatibleError("release.observed contains non-finite values")
    return np.ascontiguousarray(s)


def _positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PrivpostError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _interweave_steps(value) -> int:
    """``interweave`` option -> number of non-centred MH steps per iteration."""
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise PrivpostError(f"interweave must be False, True or an integer >= 0, got {value!r}")


class _Problem:
    """Everything :func:`run` checks once: the model/query/mechanism fit, the kernel family and
    its weights, the normalising constant of the mechanism's density, the record layout."""

    def __init__(self, model, release, *, proposal=None, sweeps_per_iteration: int = 1,
                 interweave=0):
        self.k = _positive_int(sweeps_per_iteration, "sweeps_per_iteration")
        self.interweave = _interweave_steps(interweave)
        for attr in ("query", "mechanism", "n", "observed"):
            if not hasattr(release, attr):
                raise IncompatibleError(
                    f"damcmc needs a single Release (query, mechanism, n, observed); got "
                    f"{type(release).__name__} without {attr!r}")
        for attr in ("param_shapes", "prior_sample", "simulate", "update"):
            if not hasattr(model, attr):
                raise IncompatibleError(
                    f"damcmc needs a model with prior_sample, simulate, update and param_shapes; "
                    f"{type(model).__name__} has no {attr!r}")
        self.model = model
        self.release = release
        query = self.query = release.query
        mech = self.mech = release.mechanism
        if hasattr(model, "check_query"):
            model.check_query(query)
        kernel = getattr(mech, "kernel", None)
        mname = getattr(mech, "name", type(mech).__name__)
        if kernel not in _kernels.KERNELS:
            raise IncompatibleError(
                f"mechanism {mname} has no density usable by damcmc (it needs a record-additive "
                f"noise density of the l1 or l2 family: Laplace, Gaussian, discrete Laplace or "
                f"discrete Gaussian)")
        self.kernel = kernel
        scale = getattr(mech, "scale", None)
        if scale is None or not np.all(np.isfinite(scale)) or not np.all(np.asarray(scale) > 0):
            raise IncompatibleError(f"mechanism {mname} has no finite positive scale "
                                    f"(is it calibrated?), got {scale!r}")
        if getattr(mech, "discrete", False) and not getattr(query, "integer", False):
            raise IncompatibleError(
                f"mechanism {mname} adds integer noise, but query {type(query).__name__} is not "
                f"integer-valued")
        self.n = _positive_int(release.n, "release.n")
        self.d = int(query.dim)
        self.s_obs = _as_observed(release, self.d)
        self.scale = scale
        self.weight = _kernels.weights_for(kernel, scale, self.d)
        self.sweep = _kernels.KERNELS[kernel]
        self.log_g = _kernels.LOG_G[kernel]
        self.use_l2 = kernel == "l2"
        self.mech_name = mname
        self.proposal = proposal
        if proposal is not None:
            for meth in ("propose", "log_ratio"):
                if not callable(getattr(proposal, meth, None)):
                    raise IncompatibleError(
                        f"proposal {type(proposal).__name__} has no method {meth}(); a damcmc "
                        f"proposal needs propose(records, params, rng) and "
                        f"log_ratio(records, proposed, params)")
            if not callable(getattr(model, "log_likelihood", None)):
                raise IncompatibleError(f"a user proposal needs model.log_likelihood(); "
                                        f"{type(model).__name__} has none")
        try:
            has_check = "check" in inspect.signature(query.t).parameters
        except (TypeError, ValueError):
            has_check = False
        self._t_kwargs = {"check": False} if has_check else {}
        self.names = list(model.param_shapes)
        self.shapes = {k: tuple(v) for k, v in model.param_shapes.items()}
        self._check_layout_and_density()
        if self.interweave:
            self._check_interweave()

    def _check_interweave(self):
        model = self.model
        mname = type(model).__name__
        for meth in ("innovations", "from_innovations", "log_prior"):
            if not callable(getattr(model, meth, None)):
                raise IncompatibleError(
                    f"interweave needs the model's non-centred protocol (innovations, "
                    f"from_innovations, log_prior, interweave_params; docs/internals.md); "
                    f"{mname} has no {meth}()")
        moved = tuple(getattr(model, "interweave_params", ()) or ())
        bad = [nm for nm in moved if nm not in self.shapes]
        if not moved or bad:
            raise IncompatibleError(f"interweave: {mname}.interweave_params must name model "
                                    f"parameters, got {moved!r}")
        self.iw_names = moved
        self.iw_sizes = [int(np.prod(self.shapes[nm], dtype=np.int64)) for nm in moved]
        self.iw_dim = int(sum(self.iw_sizes))
        # optional reparameterisation of the moved parameters (e.g. a simplex in additive
        # log-ratio coordinates): the walk runs on v = interweave_to_free(params) and the
        # acceptance adds interweave_log_jacobian = log |d theta / d v| to log_prior
        self.iw_free = callable(getattr(model, "interweave_to_free", None))
        if self.iw_free:
            for meth in ("interweave_from_free", "interweave_log_jacobian"):
                if not callable(getattr(model, meth, None)):
                    raise IncompatibleError(f"interweave: {mname} has interweave_to_free() but "
                                            f"no {meth}() (docs/internals.md)")
            self.iw_dim = int(np.asarray(model.interweave_to_free(model.prior_sample(
                np.random.default_rng(0)))).size)
        # round trip on simulated records: from_innovations(innovations(x)) == x. 1000 records,
        # not a few: an innovations() that ignores x can still reproduce a few records (for a
        # Bernoulli record with theta near 0 or 1, each by chance with probability ~1)
        vrng = np.random.default_rng(20220518)
        params = model.prior_sample(vrng)
        recs = np.asarray(model.simulate(params, 1000, vrng))
        u = model.innovations(params, recs, vrng)
        back = np.asarray(model.from_innovations(params, u))
        if back.shape != recs.shape or not np.allclose(back, recs, rtol=1e-9, atol=1e-9):
            raise IncompatibleError(f"interweave: {mname}.from_innovations(innovations(x)) does "
                                    f"not reproduce the records x")

    # ---- contributions -----------------------------------------------------------------
    def t(self, records) -> np.ndarray:
        """Per-record contributions ``(m, d)`` as a C-contiguous float64 array."""
        return np.ascontiguousarray(self.query.t(records, **self._t_kwargs), dtype=np.float64)

    def _check_layout_and_density(self):
        vrng = np.random.default_rng(20220517)  # never a chain's stream
        model, query = self.model, self.query
        params = model.prior_sample(vrng)
        missing = [k for k in self.names if k not in params]
        if missing:
            raise IncompatibleError(f"model {type(model).__name__}.prior_sample() lacks "
                                    f"parameter(s) {missing}")
        recs = np.asarray(model.simulate(params, 3, vrng))
        if recs.shape[:1] != (3,):
            raise IncompatibleError(f"model {type(model).__name__}.simulate(params, 3) returned "
                                    f"shape {recs.shape}, expected (3, ...)")
        try:
            t = self.t(recs)
        except PrivpostError as exc:
            raise IncompatibleError(
                f"records simulated by model {type(model).__name__} do not fit query "
                f"{type(query).__name__}: {exc}") from None
        if t.shape != (3, self.d):
            raise IncompatibleError(
                f"query {type(query).__name__}.t returned shape {t.shape} for 3 records, "
                f"expected (3, {self.d})")
        if not np.all(np.isfinite(t)):
            raise IncompatibleError(f"query {type(query).__name__} gives non-finite "
                                    f"contributions for records simulated by the model")
        self.rec_tail = recs.shape[1:]
        self.rec_dtype = recs.dtype
        # The log density the compiled loop uses must be the mechanism's, up to a constant.
        self.log_const = float(self.mech.logpdf(self.s_obs, self.s_obs))
        if not np.isfinite(self.log_const):
            raise IncompatibleError(f"mechanism {self.mech_name}: logpdf(observed, observed) is "
                                    f"not finite")
        sc = float(np.max(np.asarray(self.scale, dtype=float)))
        z = vrng.normal(0.0, 2.0 * sc, size=(4, self.d))
        if getattr(self.mech, "discrete", False):
            z = np.round(z)
        for zi in z:
            T = self.s_obs - zi
            want = float(self.mech.logpdf(self.s_obs, T)) - self.log_const
            got = float(self.log_g(T, self.s_obs, self.weight))
            if not math.isclose(want, got, rel_tol=1e-7, abs_tol=1e-9):
                raise IncompatibleError(
                    f"mechanism {self.mech_name}: kernel {self.kernel!r} with scale {self.scale} "
                    f"disagrees with its logpdf ({got} vs {want}); cannot run damcmc")

    # ---- records given by the user -------------------------------------------------------
    def coerce_records(self, records) -> np.ndarray:
        arr = np.asarray(records)
        if arr.shape != (self.n,) + self.rec_tail:
            raise IncompatibleError(f"init records have shape {arr.shape}, expected "
                                    f"{(self.n,) + self.rec_tail} (n = {self.n} records in the "
                                    f"model's layout)")
        return np.array(arr, dtype=self.rec_dtype, order="C")

    def coerce_params(self, params: dict) -> dict:
        out = {}
        for name in self.names:
            if name not in params:
                raise IncompatibleError(f"init params lack {name!r} (model parameters: "
                                        f"{self.names})")
            v = np.asarray(params[name], dtype=np.float64)
            if v.shape != self.shapes[name]:
                raise IncompatibleError(f"init param {name!r} has shape {v.shape}, expected "
                                        f"{self.shapes[name]}")
            out[name] = v.copy()
        return out


def _split_init(init, chains: int) -> list[dict | None]:
    """``init`` -> one ``{"params": ..., "records": ...}`` (or None) per chain."""
    if init is None:
        return [None] * chains
    if isinstance(init, (list, tuple)):
        if len(init) != chains:
            raise PrivpostError(f"init is a list of {len(init)} entries, expected one per chain "
                                f"({chains})")
        return [_one_init(i) for i in init]
    one = _one_init(init)
    return [one] * chains


def _one_init(init):
    if init is None:
        return None
    if not isinstance(init, dict):
        raise PrivpostError("init must be a dict (parameter values, or keys 'params' and/or "
                            "'records'), a list of such dicts (one per chain), or None")
    if init and set(init) <= {"params", "records"}:
        return {"params": init.get("params"), "records": init.get("records")}
    return {"params": init, "records": None}


# ============================================================================================
# the step-level sampler (generic path: NumPy proposals + compiled accept/reject loop)
# ============================================================================================

@dataclass
class ChainState:
    """State of one DA-MCMC chain.

    Attributes
    ----------
    params : dict[str, ndarray]
        Current parameters.
    records : ndarray, shape (n, ...)
        Current latent confidential records (model layout).
    t_cur : ndarray, shape (n, d)
        Contributions ``query.t(records)`` (kept in step with ``records``).
    T : ndarray, shape (d,)
        Running sum ``t_cur.sum(axis=0)``, updated incrementally.
    """

    params: dict
    records: np.ndarray
    t_cur: np.ndarray
    T: np.ndarray
    accept: np.ndarray = field(repr=False)
    record_counts: np.ndarray = field(repr=False)
    sweep_counts: np.ndarray = field(repr=False)
    log_u: np.ndarray = field(repr=False, default=None)
    rec2d: np.ndarray = field(repr=False, default=None)
    # non-centred (interweaving) theta-move: proposal state; ``adapting`` is set by the chain
    # driver during warm-up only (the proposal is fixed afterwards, so the kernel is exact)
    iw: "_IWState | None" = field(repr=False, default=None)
    adapting: bool = field(repr=False, default=False)


class _IWState:
    """Random-walk proposal of the non-centred theta-move: ``theta* = theta + s * C z``.

    During warm-up ``log s`` follows a Robbins--Monro recursion towards a target acceptance and
    ``C`` becomes the Cholesky factor of the running covariance of theta (switched in after
    ``max(20, 5 d)`` adapting steps and refreshed every 50); after warm-up both are frozen.
    """

    def __init__(self, dim: int):
        self.dim = dim
        self.log_s = math.log(0.1)
        self.chol = np.eye(dim)
        self.target = 0.44 if dim == 1 else 0.3
        self.t = 0                     # adapting steps so far
        self.mean = np.zeros(dim)
        self.m2 = np.zeros((dim, dim))
        self.switched = False
        self.proposed = 0              # post-warm-up counters
        self.accepted = 0

    def adapt(self, v: np.ndarray, alpha: float) -> None:
        self.t += 1
        t = self.t
        self.log_s += (alpha - self.target) * min(1.0, 5.0 * t ** -0.6)
        self.log_s = min(max(self.log_s, -30.0), 10.0)
        delta = v - self.mean
        self.mean += delta / t
        self.m2 += np.outer(delta, v - self.mean)
        if t >= max(20, 5 * self.dim) and (not self.switched or t % 50 == 0):
            cov = self.m2 / (t - 1)
            ridge = 1e-10 * max(float(np.trace(cov)) / self.dim, 1e-300)
            try:
                chol = np.linalg.cholesky(cov + ridge * np.eye(self.dim))
            except np.linalg.LinAlgError:
                return
            if not np.all(np.isfinite(chol)) or not np.any(np.diag(chol) > 0):
                return
            self.chol = chol
            if not self.switched:
                self.switched = True
                self.log_s = math.log(2.38 / math.sqrt(self.dim))


def _copy_records(st: ChainState, prop, m: int) -> None:
    """Copy accepted proposals (rows ``r`` of ``prop``, record ``r mod n``) into the records."""
    prop = np.asarray(prop)
    if prop.dtype == st.rec2d.dtype and prop.flags.c_contiguous:
        _kernels.copy_accepted(st.rec2d, prop.reshape(m, -1), st.accept)
    else:  # unusual dtype/layout from a user model: plain NumPy, in sweep order
        n = st.rec2d.shape[0]
        src = prop.reshape(m, -1)
        for j in range(m // n):
            acc = st.accept[j * n:(j + 1) * n]
            st.rec2d[acc] = src[j * n:(j + 1) * n][acc]


class Sampler:
    """DA-MCMC for one (model, release) pair, one step at a time (generic path).

    ``init(rng, init=None) -> ChainState``; ``step(state, rng) -> int`` (one iteration: theta
    update then ``sweeps_per_iteration`` record sweeps; returns the number of accepted record
    proposals and updates ``state`` in place); ``recompute(state) -> float`` (debug hook:
    recompute ``t_cur`` and ``T`` from the records, return the largest drift of ``T``);
    ``log_eta(state)`` (normalised ``log eta(s_dp | x)``).
    """

    def __init__(self, model, release, *, proposal=None, sweeps_per_iteration: int = 1,
                 interweave=0, _problem: _Problem | None = None):
        self.p = _problem or _Problem(model, release, proposal=proposal,
                                      sweeps_per_iteration=sweeps_per_iteration,
                                      interweave=interweave)

    @property
    def problem(self) -> _Problem:
        return self.p

    def init(self, rng, init=None) -> ChainState:
        p = self.p
        rng = as_generator(rng)
        init = _one_init(init)
        params = records = None
        if init is not None:
            if init.get("params") is not None:
                params = p.coerce_params(init["params"])
            if init.get("records") is not None:
                records = p.coerce_records(init["records"])
        if params is None:
            params = p.model.prior_sample(rng)
        if records is None:
            records = np.array(p.model.simulate(params, p.n, rng), dtype=p.rec_dtype, order="C")
        t_cur = p.t(records).copy()
        T = np.ascontiguousarray(t_cur.sum(axis=0))
        m = p.n * (p.k if p.proposal is None else 1)
        st = ChainState(params=params, records=records, t_cur=t_cur, T=T,
                        accept=np.zeros(m, dtype=np.bool_),
                        record_counts=np.zeros(p.n, dtype=np.int64),
                        sweep_counts=np.zeros(p.k, dtype=np.int64))
        st.log_u = np.zeros(m)
        st.rec2d = records.reshape(p.n, -1)   # a view: copies into it update ``records``
        if p.interweave:
            st.iw = _IWState(p.iw_dim)
        return st

    def step(self, st: ChainState, rng) -> int:
        p = self.p
        model = p.model
        params = model.update(st.params, st.records, rng)
        st.params = params
        if p.interweave:
            self._interweave(st, rng)
            params = st.params
        if p.proposal is not None:
            return self._step_user(st, rng, params)
        n, k = p.n, p.k
        m = n * k
        prop = model.simulate(params, m, rng)
        t_prop = p.t(prop)
        log_u = st.log_u
        rng.standard_exponential(out=log_u)
        np.negative(log_u, out=log_u)
        nacc = p.sweep(st.T, p.s_obs, st.t_cur, t_prop, _EMPTY, log_u, p.weight, st.accept,
                       st.record_counts, st.sweep_counts)
        if nacc:
            _copy_records(st, prop, m)
        return nacc

    def _step_user(self, st: ChainState, rng, params) -> int:
        # Algorithm 2: the proposal for record i may depend on x_i (its value at the start of
        # the sweep, which is its value when it is visited), theta and s_dp, not on x_{-i};
        # so one vectorised call per sweep is exact. Sweeps are sequential.
        p = self.p
        model, prop_obj = p.model, p.proposal
        n = p.n
        ll_cur = np.asarray(model.log_likelihood(params, st.records), dtype=np.float64)
        total = 0
        for j in range(p.k):
            prop = np.asarray(prop_obj.propose(st.records, params, rng))
            ll_prop = np.asarray(model.log_likelihood(params, prop), dtype=np.float64)
            extra = (ll_prop - ll_cur
                     + np.asarray(prop_obj.log_ratio(st.records, prop, params), dtype=np.float64))
            extra = np.ascontiguousarray(extra, dtype=np.float64).reshape(n)
            t_prop = p.t(prop)
            log_u = rng.standard_exponential(n)
            np.negative(log_u, out=log_u)
            nacc = p.sweep(st.T, p.s_obs, st.t_cur, t_prop, extra, log_u, p.weight, st.accept,
                           st.record_counts, st.sweep_counts[j:j + 1])
            if nacc:
                _copy_records(st, prop, n)
                ll_cur = np.where(st.accept, ll_prop, ll_cur)
            total += nacc
        return total

    def _interweave(self, st: ChainState, rng) -> None:
        """``p.interweave`` non-centred MH steps: theta moves with the innovations held fixed.

        ``u ~ p(u | x, theta)`` (the model's ``innovations``; deterministic for continuous
        records), so ``(theta, u)`` follows the augmented target ``p(theta) p(u | theta)
        eta(s | g(theta, u))``; a symmetric random walk on the ``interweave_params`` with ``u``
        fixed is accepted with ``p(theta*) p(u | theta*) eta(s | T*) / (p(theta) p(u | theta)
        eta(s | T))``. ``p(u | theta)`` is the model's optional ``innovations_log_density``
        (a partially non-centred parametrisation); without it the law of ``u`` is free of theta
        and the term cancels. The records are then ``x = g(theta, u)``.
        """
        p = self.p
        model, iw = p.model, st.iw
        params = st.params
        u = model.innovations(params, st.records, rng)
        u_density = getattr(model, "innovations_log_density", None)
        if p.iw_free:
            v = np.asarray(model.interweave_to_free(params), dtype=np.float64)
            lp = float(model.log_prior(params)) + float(model.interweave_log_jacobian(params))
        else:
            v = np.concatenate([np.asarray(params[nm], dtype=np.float64).ravel()
                                for nm in p.iw_names])
            lp = float(model.log_prior(params))
        if u_density is not None:
            lp += float(u_density(params, u))
        T_cur = st.T
        new_x = new_t = None
        for _ in range(p.interweave):
            z = rng.standard_normal(p.iw_dim)
            log_v = math.log1p(-rng.random())   # log of a U(0, 1] variate
            vp = v + math.exp(iw.log_s) * (iw.chol @ z)
            if p.iw_free:
                prop = model.interweave_from_free(params, vp)
                lpp = float(model.log_prior(prop)) + float(model.interweave_log_jacobian(prop))
            else:
                prop = dict(params)
                off = 0
                for nm, size in zip(p.iw_names, p.iw_sizes):
                    prop[nm] = vp[off:off + size].reshape(p.shapes[nm]).copy()
                    if prop[nm].ndim == 0:
                        prop[nm] = np.float64(prop[nm])
                    off += size
                lpp = float(model.log_prior(prop))
            if u_density is not None and lpp > -math.inf:
                lpp += float(u_density(prop, u))
            alpha = 0.0
            if lpp > -math.inf:
                xp = np.ascontiguousarray(model.from_innovations(prop, u), dtype=p.rec_dtype)
                tp = p.t(xp)
                Tp = np.ascontiguousarray(tp.sum(axis=0))
                # log g(s, Tp) - log g(s, T_cur) from the residuals (cancellation-free)
                log_a = lpp - lp + float(_kernels.log_g_change(T_cur, Tp, p.s_obs, p.weight,
                                                                p.use_l2))
                if log_a != log_a:      # NaN (e.g. inf - inf): reject
                    log_a = -math.inf
                alpha = 1.0 if log_a >= 0 else math.exp(log_a)
                if log_v < log_a:
                    params, v, lp, T_cur = prop, vp, lpp, Tp
                    new_x, new_t = xp, tp
                    if not st.adapting:
                        iw.accepted += 1
            if st.adapting:
                iw.adapt(v, alpha)
            else:
                iw.proposed += 1
        if new_x is not None:
            st.params = params
            st.rec2d[...] = new_x.reshape(st.rec2d.shape)
            st.t_cur[...] = new_t
            st.T[...] = new_t.sum(axis=0)

    def recompute(self, st: ChainState) -> float:
        """Debug/test hook: recompute ``t_cur`` and ``T`` from scratch; return max ``|ΔT|``."""
        t_new = self.p.t(st.records)
        T_new = t_new.sum(axis=0)
        drift = float(np.max(np.abs(T_new - st.T))) if T_new.size else 0.0
        st.t_cur[...] = t_new
        st.T[...] = T_new
        return drift

    def log_eta(self, st: ChainState) -> float:
        """Normalised ``log eta(s_dp | x) = log g(s_dp, T)`` at the current state."""
        return self.p.log_const + float(self.p.log_g(st.T, self.p.s_obs, self.p.weight))


# ============================================================================================
# chains: bookkeeping shared by the generic and the compiled drivers
# ============================================================================================

class _GenericChain:
    """One chain on the generic path, advanced in blocks of iterations."""

    def __init__(self, sampler: Sampler, chain: int, rng, init, draws, warmup, thin,
                 recompute_every: int = 1000):
        p = sampler.p
        self.sampler, self.chain, self.rng = sampler, chain, rng
        self.state = sampler.init(rng, init)
        self.draws, self.warmup, self.thin = draws, warmup, thin
        self.total = warmup + draws * thin
        self.it = 0
        self.n_stored = 0
        self.out = {name: np.zeros((draws,) + p.shapes[name]) for name in p.names}
        self.accept_rate = np.zeros(draws)
        self.accept_min = np.zeros(draws)
        self.log_eta = np.zeros(draws)
        self.block_min = math.inf
        self.recompute_every = recompute_every
        self.max_drift = 0.0

    def advance(self, n_iter: int) -> None:
        sampler, st, p = self.sampler, self.state, self.sampler.p
        m = p.n * p.k
        inv_n = 1.0 / p.n
        warmup, thin = self.warmup, self.thin
        for _ in range(n_iter):
            it = self.it
            if it == warmup:
                st.record_counts[:] = 0
            st.adapting = it < warmup
            nacc = sampler.step(st, self.rng)
            if it >= warmup:
                mn = (nacc if p.k == 1 else int(st.sweep_counts.min())) * inv_n
                if mn < self.block_min:
                    self.block_min = mn
                if (it - warmup) % thin == thin - 1:
                    j = self.n_stored
                    params = st.params
                    for name, arr in self.out.items():
                        arr[j] = params[name]
                    self.accept_rate[j] = nacc / m
                    self.accept_min[j] = self.block_min
                    self.log_eta[j] = p.log_const + p.log_g(st.T, p.s_obs, p.weight)
                    self.block_min = math.inf
                    self.n_stored = j + 1
            if self.recompute_every and (it + 1) % self.recompute_every == 0:
                # Guard against floating-point drift of the running sum (exact for counts).
                self.max_drift = max(self.max_drift, sampler.recompute(st))
            self.it = it + 1

    def extend(self, extra: int) -> None:
        """Room for ``extra`` more draws (run-until-converged rounds)."""
        self.out = {k: np.concatenate([v, np.zeros((extra,) + v.shape[1:])])
                    for k, v in self.out.items()}
        for attr in ("accept_rate", "accept_min", "log_eta"):
            setattr(self, attr, np.concatenate([getattr(self, attr), np.zeros(extra)]))
        self.draws += extra
        self.total += extra * self.thin

    def post_sweeps(self) -> int:
        return max(0, self.it - self.warmup) * self.sampler.p.k

    def result(self) -> dict:
        j = self.n_stored
        return {"draws": {k: v[:j] for k, v in self.out.items()},
                "accept_rate": self.accept_rate[:j], "accept_min": self.accept_min[:j],
                "log_eta": self.log_eta[:j], "record_counts": self.state.record_counts.copy(),
                "post_sweeps": self.post_sweeps(), "n_stored": j, "it": self.it,
                "interweave": _iw_summary(self.state.iw)}


def _iw_summary(iw) -> dict | None:
    if iw is None:
        return None
    return {"accept_rate": iw.accepted / iw.proposed if iw.proposed else math.nan,
            "scale": math.exp(iw.log_s), "chol": iw.chol.copy()}


def _make_chains(problem: _Problem, fast, chain_ids, rngs, inits, draws, warmup, thin):
    if fast is not None:
        from privpost.inference._damcmc_fast import CompiledChain

        sampler = Sampler(None, None, _problem=problem)
        return [CompiledChain(fast, sampler, c, r, i, draws, warmup, thin)
                for c, r, i in zip(chain_ids, rngs, inits)]
    sampler = Sampler(None, None, _problem=problem)
    return [_GenericChain(sampler, c, r, i, draws, warmup, thin)
            for c, r, i in zip(chain_ids, rngs, inits)]


def _round_robin(chains, report, should_stop) -> None:
    """Advance every chain to its end, in blocks of about ``_BLOCK_SECONDS`` each, in turn.

    Chains advance together so that an interruption leaves them at similar lengths. A chain's
    draws do not depend on the block sizes.
    """
    blocks = [1] * len(chains)
    while True:
        busy = False
        for idx, ch in enumerate(chains):
            left = ch.total - ch.it
            if left <= 0:
                continue
            busy = True
            if should_stop():
                return
            nb = min(blocks[idx], left)
            t0 = time.perf_counter()
            ch.advance(nb)
            dt = time.perf_counter() - t0
            per = dt / nb
            blocks[idx] = max(1, min(int(_BLOCK_SECONDS / per) if per > 0 else 10 * nb, 10 * nb))
            report(ch.chain, ch.it)
        if not busy:
            return


# ---- worker processes -------------------------------------------------------------------

_SHARED = None  # multiprocessing RawArray: [iterations done per chain..., stop flag]
_QUEUE = None   # run until converged: workers -> parent, each round's draws
_CTRL = None    # run until converged: parent -> workers, RawArray [round decided, extra draws]
# A worker waits at most this long (s) for the parent's decision after a round; the parent
# decides as soon as every chain's round has arrived, so only a dead parent reaches it.
_DECISION_TIMEOUT = 600.0


def _init_worker(shared, queue=None, ctrl=None) -> None:
    global _SHARED, _QUEUE, _CTRL
    _SHARED, _QUEUE, _CTRL = shared, queue, ctrl
    if queue is not None:
        # a round's draws are put only while the parent waits for them, or after it raised the
        # stop flag (then they are not needed): never block the worker's exit on them
        queue.cancel_join_thread()
    # Ctrl-C goes to the whole process group: the parent handles it and raises the stop flag.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker(model, release, opts, chain_ids, rngs, inits):
    problem = _Problem(model, release, proposal=opts["proposal"],
                       sweeps_per_iteration=opts["sweeps_per_iteration"],
                       interweave=opts["interweave"])
    fast = resolve_fast_path(problem, opts["fast_path"], quiet=True)
    chains = _make_chains(problem, fast, chain_ids, rngs, inits, opts["draws"],
                          opts["warmup"], opts["thin"])
    shared = _SHARED
    stop_at = len(shared) - 1

    def report(c, it):
        shared[c] = it

    def stopped():
        return shared[stop_at] != 0

    rnd = 0
    while True:
        _round_robin(chains, report, stopped)
        if shared[stop_at] == _STOP_TIME:    # time budget spent: at least 4 draws per chain
            _cut_warmup(chains)
        if not opts.get("auto") or stopped():
            break
        # run until converged: hand this round's draws to the parent, wait for its decision
        _QUEUE.put([(ch.chain, ch.result()) for ch in chains])
        rnd += 1
        deadline = time.monotonic() + _DECISION_TIMEOUT   # every wait has a timeout
        while _CTRL[0] < rnd and not stopped() and time.monotonic() < deadline:
            time.sleep(0.01)
        extra = int(_CTRL[1])
        if stopped() or _CTRL[0] < rnd or extra <= 0:
            break
        for ch in chains:
            ch.extend(extra)
    return [_chain_result(ch) for ch in chains]


#: value of the workers' stop flag when the parent stops them because the time budget is spent
#: (1: an error or Ctrl-C); the workers then cut the warm-up (:func:`_cut_warmup`)
_STOP_TIME = 2


def _cut_warmup(chains) -> None:
    """The time budget ran out before every chain kept 4 draws (in the warm-up, typically): as
    :func:`privpost.inference._until.run_rounds`, cut each chain's warm-up where it is and make
    4 draws per chain (``4 * thin`` iterations), so that the diagnostics can say how far from
    converged the run is instead of returning an empty posterior. A chain whose warm-up was cut
    records the iteration in ``warm_cut``."""
    for ch in chains:
        if ch.n_stored >= 4:
            continue
        if ch.it < ch.warmup:
            ch.warm_cut = ch.it
            ch.warmup = ch.it
            ch.total = ch.warmup + ch.draws * ch.thin
        need = ch.warmup + 4 * ch.thin - ch.it
        if need > 0:
            ch.advance(need)


def _chain_result(ch) -> tuple:
    """``(chain id, result dict, max drift)`` of a finished chain; the result also holds
    ``warm_cut`` (the iteration where a spent time budget cut the warm-up, or None)."""
    res = ch.result()
    res["warm_cut"] = getattr(ch, "warm_cut", None)
    return ch.chain, res, getattr(ch, "max_drift", 0.0)


def _mp_context():
    # fork keeps user-defined model classes (scripts, notebooks) usable in the workers and
    # inherits the compiled kernels; elsewhere use the platform default.
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context()


# ---- progress bar -----------------------------------------------------------------------

class _Progress:
    def __init__(self, enabled: bool, total: int, chains: int):
        self.bar = None
        self.total = total
        if not enabled:
            return
        try:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
        except ImportError:  # pragma: no cover - rich is a dependency
            return
        self.bar = Progress(TextColumn("[bold]damcmc[/bold] {task.description}"), BarColumn(),
                            MofNCompleteColumn(), TextColumn("iterations"), TimeElapsedColumn(),
                            TextColumn("eta"), TimeRemainingColumn(), transient=False)
        self.label = f"{chains} chain{'s' if chains > 1 else ''}"
        self.task = self.bar.add_task(self.label, total=total)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def update(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def next_round(self, total: int, worst: tuple[float, float]) -> None:
        """Run until converged: a new total, and the worst ESS / R-hat so far in the label."""
        self.total = total
        if self.bar is not None:
            self.bar.update(self.task, total=total, description=(
                f"{self.label} | worst ESS {worst[0]:.0f} (>= 400), R-hat {worst[1]:.3f} "
                f"(<= 1.01)"))

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


# ============================================================================================
# the method
# ============================================================================================

#: damcmc's warm-up (iterations per chain) when neither the user nor the model gives one
#: (:func:`default_warmup`)
DEFAULT_WARMUP = 1000


def default_warmup(model, release) -> tuple[int, str]:
    """The warm-up of a run without ``warmup=``: ``(iterations per chain, where it comes
    from)``. A model may declare its own for a release with the optional
    ``model.default_warmup(release) -> int | None`` (``None``: no opinion), justified in that
    method's docstring by measured converged runs; else :data:`DEFAULT_WARMUP`. A declared value
    that is not an integer >= 0 raises :class:`PrivpostError` naming the model's method."""
    hook = getattr(model, "default_warmup", None)
    if callable(hook):
        w = hook(release)
        if w is not None:
            name = f"{type(model).__name__}.default_warmup"
            return _positive_int(w, name, 0), f"the model's default, {name}"
    return DEFAULT_WARMUP, "damcmc's default"


def run(model, release, *, draws: int | None = None, warmup: int | None = None, chains: int = 4,
        seed=None, thin: int = 1, sweeps_per_iteration: int = 1, progress: bool = True,
        cores: int | None = None, init=None, proposal=None, fast_path="auto",
        interweave="auto", start: str = "data", max_draws: int | None = None,
        max_seconds: float | None = None, latent: str = "auto"):
    """Exact private posterior by data augmentation MCMC (Ju et al. 2022, Algorithms 1 and 2).

    Parameters
    ----------
    model : privpost.models.Model
        Prior, record simulator (the proposal of Algorithm 1) and ``update`` kernel.
    release : privpost.Release
        The private release; its mechanism must have a compiled kernel (``kernel`` ``"l1"``:
        Laplace, discrete Laplace; ``"l2"``: Gaussian, discrete Gaussian).
    draws : int or None
        Retained draws per chain (after warm-up and thinning). ``None`` (default): run until
        converged (:mod:`privpost.inference._until`): rounds of draws (first 1000 per chain)
        until every scalar parameter entry has split R-hat <= 1.01 and bulk and tail ESS >= 400,
        or a budget runs out (``max_draws``, ``max_seconds``); the progress bar shows the worst
        ESS and R-hat. A run that stops on a budget warns (ConvergenceWarning).
    max_draws : int or None
        Run until converged: the iteration budget, as retained draws per chain (default 50,000).
    max_seconds : float or None
        Run until converged: the wall-time budget of the sampling (default 600 s; ``None`` with
        ``max_draws`` given: no time budget).
    warmup : int or None
        Iterations discarded at the start of each chain (the non-centred moves' proposals adapt
        during them). ``None`` (default): the model's default for this release when it declares
        one (optional ``model.default_warmup(release)``; the Dirichlet: 300), else
        :data:`DEFAULT_WARMUP` = 1000 (:func:`default_warmup`). The notes state the warm-up
        used and where it came from.
    chains : int
        Independent chains (streams from :func:`privpost._rng.spawn`).
    seed : None, int or numpy.random.Generator
        Same seed -> same draws, whatever ``cores``.
    thin : int
        Keep every ``thin``-th post-warm-up iteration (``draws * thin`` post-warm-up iterations).
    sweeps_per_iteration : int
        ``k`` record sweeps between parameter updates (Algorithm 1 draws the proposals of all
        ``k`` sweeps at once; they depend only on theta).
    progress : bool
        Show a Rich progress bar (aggregated over chains and processes).
    cores : int or None
        Chains run in parallel (default: ``min(chains, os.cpu_count())``): threads of this
        process on the compiled driver (it releases the GIL), worker processes on the generic
        path. ``1`` (or one chain) runs every chain in this thread.
    init : None, dict or list of dict
        ``None``: theta from the prior and records from the model (as the paper's code).
        A dict of parameter values, or ``{"params": ..., "records": (n, ...) array}`` (either
        key optional), for every chain; or a list of such, one per chain.
    proposal : object or None
        Algorithm 2: an object with ``propose(records, params, rng) -> proposed records`` (same
        layout, one proposal per record; may depend on ``x_i``, theta and ``s_dp`` but not on
        ``x_{-i}``) and ``log_ratio(records, proposed, params) -> (n,)`` array of
        ``log q(x_i | x_i*) - log q(x_i* | x_i)``. ``None``: model proposals (Algorithm 1).
    fast_path : "auto", bool
        Use the fully compiled driver when the model and query implement the compiled protocol
        (``docs/internals.md``). ``True`` requires it; ``False`` never uses it. ``"auto"``
        uses it for runs of at least ``_damcmc_fast.AUTO_MIN_WORK`` record updates (the
        model's compiled functions cost about that much to compile once per process); the
        choice depends on the arguments only, so the same seed gives the same draws.
    interweave : "auto", bool or int
        Non-centred (interweaving, ASIS-style) theta-moves per iteration, after the centred
        ``update``: ``False``/``0`` none, ``True`` one, an int that many. ``"auto"`` (default):
        one (four on the compiled driver, :data:`AUTO_COMPILED_STEPS`) when the model
        implements the non-centred protocol (BetaBernoulli, PoissonGamma,
        LinearRegression, NormalKnownVariance, NormalInverseGamma, ExponentialGamma,
        DirichletCategorical, ...) and there is no user ``proposal`` (with ``fast_path=True``:
        only when the model also has the compiled move); none otherwise. Each is an
        exact random-walk MH step on the model's ``interweave_params`` with the records'
        innovations ``u`` held fixed (``x = g(theta, u)``); it needs the model's optional
        protocol ``innovations``/``from_innovations``/``log_prior``/``interweave_params``
        (``docs/internals.md``). The proposal scale and covariance adapt during warm-up only.
        Models whose ``compiled_model()`` has ``interweave`` (the compiled move) run it in the
        compiled driver (same move, same adaptation); the others on the generic path
        (``fast_path="auto"`` picks it, ``fast_path=True`` raises) -- except that ``"auto"``
        drops the move when the run is large enough for the compiled driver and the model has
        a compiled centred driver but no compiled move (NaiveBayesLogLinear and the NIW
        regression have theirs since issue 13), where the centred compiled driver is faster
        per second. On the compiled driver a model may choose the number of moves for the
        release (optional ``interweave_auto_steps``; the Dirichlet: none when the noise is small
        against the sampling variance of its statistic); the notes say so.
    start : "data" or "prior"
        Starting values when ``init`` is None. ``"data"`` (default): each chain starts where
        the release puts the mass, dispersed across chains (:mod:`privpost.inference._start`:
        the naive plug-in posterior of the release re-noised with fresh mechanism noise, records
        shifted to reproduce it, the model's own plug-in, or the best of several prior draws by
        their simulated statistic); falls back to the prior when none applies.
        ``"prior"``: theta from the prior and records from the model (the paper's code). The
        start changes only how fast the chains reach the posterior, not their target.

    latent : "auto", "counts" or "records"
        What is imputed (:mod:`privpost.inference._count_latent`, DESIGN §10). ``"auto"``
        (default): the count table when the (model, release) pair declares its exact law
        (``model.count_latent(release)``) and no option of the record-level sampler is set
        (``proposal``, ``init``, ``fast_path``, ``interweave``, ``sweeps_per_iteration``,
        ``thin``), else the records; ``"counts"``: the count table (raises when none is
        declared, or with one of those options); ``"records"``: the records (the path
        described above). The count path runs its chains in this thread (``cores`` is not
        used).

    Returns
    -------
    privpost.Posterior
        ``draws`` for every model parameter; ``sample_stats``: ``accept_rate`` (mean record
        acceptance over the iteration's sweeps), ``accept_min`` (minimum per-sweep acceptance
        over the iterations the draw represents, thinned ones included), ``log_eta``
        (``log eta(s_dp | x)`` at the draw); ``chain_stats``: ``min_sweep_accept`` (chains,) and
        ``record_accept_rate`` (chains, n). ``exact=True``.

    Raises
    ------
    privpost.errors.IncompatibleError
        When the model, the query and the mechanism do not fit (checked before sampling).
    """
    from privpost.inference import _count_latent

    warm_from = "given"
    if warmup is None:
        warmup, warm_from = default_warmup(model, release)
    law = _count_latent.law_for_options(model, release, dict(
        latent=latent, proposal=proposal, init=init, fast_path=fast_path, interweave=interweave,
        sweeps_per_iteration=sweeps_per_iteration, thin=thin))
    if law is not None:
        post = _count_latent.run_with_options(law, model, release, dict(
            draws=draws, warmup=warmup, chains=chains, seed=seed, progress=progress,
            max_draws=max_draws, max_seconds=max_seconds, start=start))
        # before a NOT CONVERGED note, which stays last
        at = next((i for i, n in enumerate(post.notes) if n.startswith("NOT CONVERGED")),
                  len(post.notes))
        post.notes.insert(at, _warmup_note(warmup, warm_from))
        return post
    reject_release_set("damcmc", release)
    plan = None
    if draws is None or (isinstance(draws, str) and draws == "auto"):
        from privpost.inference import _until

        budget = _positive_int(max_draws, "max_draws") if max_draws is not None \
            else _until.MAX_DRAWS
        if max_seconds is None and max_draws is None:
            max_seconds = _until.MAX_SECONDS
        if max_seconds is not None and not (isinstance(max_seconds, (int, float))
                                            and not isinstance(max_seconds, bool)
                                            and max_seconds > 0):
            raise PrivpostError(f"max_seconds must be a number > 0 or None, got {max_seconds!r}")
        plan = _until.Plan(_until.FIRST_DRAWS, budget, max_seconds)
        draws = plan.first
    draws = _positive_int(draws, "draws")
    warmup = _positive_int(warmup, "warmup", 0)
    chains = _positive_int(chains, "chains")
    thin = _positive_int(thin, "thin")
    if cores is not None:
        cores = _positive_int(cores, "cores")
    if fast_path not in ("auto", True, False):
        raise PrivpostError(f"fast_path must be 'auto', True or False, got {fast_path!r}")
    auto_iw = isinstance(interweave, str)
    if isinstance(interweave, str):
        if interweave != "auto":
            raise PrivpostError(f"interweave must be 'auto', False, True or an integer >= 0, "
                                f"got {interweave!r}")
        interweave = int(proposal is None and all(
            callable(getattr(model, m, None))
            for m in ("innovations", "from_innovations", "log_prior"))
            and bool(getattr(model, "interweave_params", ()))
            and (fast_path is not True or _compiled_interweave(model)))
    problem = _Problem(model, release, proposal=proposal,
                       sweeps_per_iteration=sweeps_per_iteration, interweave=interweave)
    total = warmup + draws * thin
    work = float(chains) * total * (problem.k * problem.n + 500)
    if problem.interweave:
        # the NumPy interweaving move costs about as much as this many record updates per
        # step, which the compiled move saves (benchmarks/README.md, "Defaults of damcmc")
        work += float(chains) * total * problem.interweave * _IW_STEP_WORK
    fast = resolve_fast_path(problem, fast_path, work=work)
    if auto_iw and problem.interweave and fast is not None:
        # compiled moves cost about one pass over the records each: several per iteration
        problem.interweave = AUTO_COMPILED_STEPS
    elif auto_iw and problem.interweave and fast_path == "auto":
        # the model has a NumPy move but no compiled one (every built-in model but Dirichlet
        # has the compiled move): for a run large enough for the compiled driver, the centred
        # compiled driver beat the NumPy move per second on every case measured (3-20x;
        # benchmarks/README.md, "More non-centred moves"), so "auto" takes it
        problem.interweave = 0
        work = float(chains) * total * (problem.k * problem.n + 500)
        fast = resolve_fast_path(problem, fast_path, work=work, quiet=True)
        if fast is None:
            problem.interweave = 1
    if start not in ("data", "prior"):
        raise PrivpostError(f"start must be 'data' or 'prior', got {start!r}")
    inits = _split_init(init, chains)
    rngs = spawn(seed, chains)
    start_note = None
    if init is None and start == "data":
        from privpost.inference._start import data_inits

        # the start's own streams: children of the chains' seed sequences (the chains' streams
        # are not advanced)
        found, start_note = data_inits(problem, [r.spawn(1)[0] for r in rngs])
        if found is not None:
            inits = found
    if auto_iw and problem.interweave and fast is not None:
        start_note = _auto_steps(problem, inits, start_note)
    workers = min(chains, cores if cores is not None else (os.cpu_count() or 1))
    if workers > 1 and fast is None:
        try:
            pickle.dumps((model, release, proposal, inits))
        except Exception as exc:  # noqa: BLE001 - any pickling failure means "run here"
            warnings.warn(f"damcmc: the model/release/proposal cannot be sent to worker "
                          f"processes ({exc}); running the chains in this process",
                          RuntimeWarning, stacklevel=2)
            workers = 1
    opts = {"proposal": proposal, "sweeps_per_iteration": problem.k,
            "interweave": problem.interweave,
            "fast_path": fast is not None,
            "draws": draws, "warmup": warmup, "thin": thin, "auto": plan is not None,
            "warmup_from": warm_from}
    t0 = time.perf_counter()
    if plan is not None:
        plan.t0 = t0
    if workers == 1:
        results, interrupted = _run_here(problem, fast, rngs, inits, opts, total, progress, plan)
    elif fast is not None:
        # the compiled driver releases the GIL: the chains run in threads of this process, with
        # no worker processes to start and feed (privpost.inference._threads)
        from privpost.inference._threads import run_threads

        chain_objs = _make_chains(problem, fast, list(range(len(rngs))), rngs, inits,
                                  opts["draws"], opts["warmup"], opts["thin"])
        results, interrupted = run_threads(chain_objs, problem.names, total, progress, plan,
                                           workers, round_robin=_round_robin,
                                           next_round=_next_round, progress_bar=_Progress,
                                           chain_result=_chain_result)
    else:
        results, interrupted = _run_pool(model, release, opts, rngs, inits, workers, total,
                                         progress, problem, plan)
    elapsed = time.perf_counter() - t0
    return _assemble(problem, fast, results, interrupted, opts, chains, elapsed, start_note,
                     plan)


def _warmup_note(warmup: int, source: str) -> str:
    """The note stating the warm-up a run used and where it came from."""
    return f"warm-up: {warmup} iteration{'s' if warmup != 1 else ''} per chain ({source})"


#: ``fast_path="auto"``: work (in record updates) counted for one NumPy interweaving step
#: (about 0.36 ms on seed 000's regression, i.e. ~3,600 record updates at ~100 ns each).
_IW_STEP_WORK = 3600.0
#: ``interweave="auto"`` on the compiled driver: non-centred steps per iteration (on seed 000's
#: regression the worst-coefficient ESS/s grows up to 4 steps and flattens beyond;
#: benchmarks/README.md, "Defaults of damcmc"). The generic path keeps 1 step.
AUTO_COMPILED_STEPS = 4


def noise_variance(problem) -> np.ndarray:
    """Variance of the mechanism's noise on each released coordinate ``(d,)`` (Laplace scale b:
    ``2 b^2``; Gaussian sd: ``sd^2``; the discrete families by the same formulas)."""
    sc = np.broadcast_to(np.asarray(problem.scale, dtype=np.float64), (problem.d,))
    return 2.0 * sc * sc if problem.kernel == "l1" else sc * sc


def _auto_steps(problem, inits, note):
    """``interweave="auto"`` on the compiled driver: the model's own choice of non-centred moves
    per iteration for this release (optional ``model.interweave_auto_steps(n, noise_var,
    params)`` at the first chain's start), else :data:`AUTO_COMPILED_STEPS`. Returns the start
    note with the choice appended."""
    hook = getattr(problem.model, "interweave_auto_steps", None)
    first = inits[0] if inits else None
    params = first.get("params") if isinstance(first, dict) else None
    if not callable(hook) or params is None:
        return note
    try:
        k, why = hook(problem.n, noise_variance(problem), params)
        k = int(k)
    except Exception:  # noqa: BLE001 - a tuning hint only: keep the default on any failure
        return note
    if k < 0:
        return note
    problem.interweave = k
    msg = f"interweave='auto': {k} non-centred move(s) per iteration ({why})"
    return f"{note}; {msg}" if note else msg


def _compiled_interweave(model) -> bool:
    """Whether ``model.compiled_model()`` carries the compiled non-centred move."""
    getter = getattr(model, "compiled_model", None)
    if not callable(getter):
        return False
    try:
        cm = getter()
    except Exception:  # noqa: BLE001 - a broken compiled protocol means "not available"
        return False
    return cm is not None and getattr(cm, "interweave", None) is not None


def _run_here(problem, fast, rngs, inits, opts, total, progress, plan=None):
    chains = _make_chains(problem, fast, list(range(len(rngs))), rngs, inits, opts["draws"],
                          opts["warmup"], opts["thin"])
    done = [0] * len(chains)
    interrupted = False
    stop = plan.out_of_time if plan is not None else (lambda: False)
    with _Progress(progress, total * len(chains), len(chains)) as bar:
        def report(c, it):
            done[c] = it
            bar.update(sum(done))

        try:
            while True:
                _round_robin(chains, report, stop)
                if not _next_round(plan, chains, problem.names, bar):
                    break
        except KeyboardInterrupt:
            interrupted = True
    return [_chain_result(ch) for ch in chains], interrupted


def _next_round(plan, chains, names, bar) -> bool:
    """After a round of ``chains`` (all in this process): with a run-until-converged ``plan``,
    decide from every chain's draws; if more are needed extend each chain, move the progress
    bar to the new round and return True. False: the run is over (no plan, or it stops).
    A spent time budget first makes sure of 4 draws per chain (:func:`_cut_warmup`)."""
    if plan is None:
        return False
    if plan.out_of_time():
        _cut_warmup(chains)
    extra = plan.decide([ch.result() for ch in chains], names)
    if extra <= 0:
        return False
    for ch in chains:
        ch.extend(extra)
    bar.next_round(sum(ch.total for ch in chains), plan.worst)
    return True


def _run_pool(model, release, opts, rngs, inits, workers, total, progress, problem, plan=None):
    """The generic (NumPy) path's chains in worker processes (compiled runs use threads)."""
    n_chains = len(rngs)
    ctx = _mp_context()
    shared = ctx.RawArray("q", n_chains + 1)
    queue = ctx.Queue() if plan is not None else None
    ctrl = ctx.RawArray("q", 2) if plan is not None else None
    groups = [list(range(w, n_chains, workers)) for w in range(workers)]
    interrupted = False
    results = []
    futs = []
    rounds = _PoolRounds(plan, queue, ctrl, shared, n_chains, problem, total, opts["thin"])
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(shared, queue, ctrl)) as ex:
        with _Progress(progress, total * n_chains, n_chains) as bar:
            try:
                # submitting inside the try: a Ctrl-C that lands while the workers are being
                # started must still raise the stop flag, or leaving the pool waits for them
                for g in groups:
                    futs.append(ex.submit(_worker, model, release, opts, g,
                                          [rngs[c] for c in g], [inits[c] for c in g]))
                pending = set(futs)
                while pending:
                    finished, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
                    bar.update(sum(shared[:n_chains]))
                    rounds.poll(bar)
                    for f in finished:
                        if f.exception() is not None:
                            shared[n_chains] = 1  # stop the others, then re-raise
                            wait(pending)
                            raise f.exception()
                bar.update(sum(shared[:n_chains]))
            except KeyboardInterrupt:
                interrupted = True
                shared[n_chains] = 1
        for f in futs:
            results.extend(f.result())
    if len(futs) < len(groups):
        raise KeyboardInterrupt("interrupted while the worker processes were being started")
    if not interrupted and shared[n_chains] and not rounds.out_of_time:
        interrupted = True
    return results, interrupted


class _PoolRounds:
    """Run until converged with worker processes: collects each round's draws from the workers
    (a queue), decides (:class:`privpost.inference._until.Plan`) and posts the decision
    (``ctrl = [round, extra draws]``); stops the workers when the time budget runs out."""

    def __init__(self, plan, queue, ctrl, shared, n_chains, problem, total, thin):
        self.plan, self.queue, self.ctrl, self.shared = plan, queue, ctrl, shared
        self.n_chains, self.problem = n_chains, problem
        self.per_chain, self.thin = total, thin
        self.got: dict = {}
        self.round = 0
        self.out_of_time = False

    def poll(self, bar) -> None:
        import queue as _q

        plan = self.plan
        if plan is None:
            return
        if plan.out_of_time() and not self.shared[self.n_chains]:
            self.out_of_time = True
            self.shared[self.n_chains] = _STOP_TIME
        while True:
            try:
                msg = self.queue.get_nowait()
            except _q.Empty:
                break
            for c, res in msg:
                self.got[c] = res
        if len(self.got) < self.n_chains:
            return
        res = [self.got[c] for c in sorted(self.got)]
        self.got = {}
        extra = plan.decide(res, self.problem.names)
        self.ctrl[1] = max(extra, 0)
        self.round += 1
        self.ctrl[0] = self.round
        if extra > 0:
            self.per_chain += extra * self.thin
            bar.next_round(self.per_chain * self.n_chains, plan.worst)


def _assemble(problem, fast, results, interrupted, opts, n_chains, elapsed, start_note=None,
              plan=None):
    from privpost.posterior import Posterior

    results = sorted(results, key=lambda r: r[0])
    res = [r[1] for r in results]
    length = min(r["n_stored"] for r in res)
    p = problem
    draws = {name: np.stack([r["draws"][name][:length] for r in res]) for name in p.names}
    stats = {key: np.stack([r[key][:length] for r in res])
             for key in ("accept_rate", "accept_min", "log_eta")}
    rec = np.stack([r["record_counts"] / max(r["post_sweeps"], 1) for r in res])
    min_acc = np.array([r["accept_min"][:length].min() if length else np.nan for r in res])
    chain_stats = {"min_sweep_accept": min_acc, "record_accept_rate": rec}
    if p.interweave:
        chain_stats["interweave_accept_rate"] = np.array(
            [r["interweave"]["accept_rate"] if r.get("interweave") else np.nan for r in res])
    notes = ["exact: DA-MCMC (Ju et al. 2022) targets the exact private posterior; the only "
             "error is Monte Carlo error (check r_hat and ess_bulk)"]
    k = p.k
    path = ("fully compiled chain driver (model/query compiled protocol)" if fast is not None
            else "NumPy proposals + compiled accept/reject loop")
    notes.append(f"{'Algorithm 2 (user proposal)' if p.proposal is not None else 'Algorithm 1 (model proposals)'}; "
                 f"{k} record sweep{'s' if k > 1 else ''} per iteration; {path}; "
                 f"{n_chains} chain{'s' if n_chains > 1 else ''} in {elapsed:.1f} s")
    if p.interweave:
        iw_acc = chain_stats["interweave_accept_rate"]
        notes.append(f"interweaving: {p.interweave} non-centred theta-move"
                     f"{'s' if p.interweave > 1 else ''} per iteration on "
                     f"{', '.join(p.iw_names)} (innovations held fixed; proposal adapted in "
                     f"warm-up only); acceptance per chain "
                     f"{', '.join(f'{a:.3g}' for a in iw_acc)}")
    if start_note:
        notes.append(start_note)
    notes.append(_warmup_note(opts["warmup"], opts.get("warmup_from", "given")))
    if plan is not None:
        if (plan.reason is None or plan.reason.startswith("interrupted")) and \
                plan.out_of_time():
            plan.reason = f"time budget of {plan.max_seconds:g} s spent"
        cuts = [r["warm_cut"] for r in res if r.get("warm_cut") is not None]
        if cuts and (plan.reason or "").startswith("time budget"):
            plan.reason += (f" during the warm-up: it was cut at {min(cuts)}-{max(cuts)} of "
                            f"{opts['warmup']} iterations per chain, then 4 draws per chain "
                            "were made")
        notes.append(plan.note(length))
    eps = _pure_epsilon(p.release)
    if eps is not None and length and p.proposal is None:
        mean_acc = float(stats["accept_rate"].mean())
        notes.append(f"pure {eps:g}-DP (replace-one): every record proposal is accepted with "
                     f"probability >= exp(-{eps:g}) = {math.exp(-eps):.3g} (Prop. 3.1); mean "
                     f"record acceptance {mean_acc:.3g}")
    if length and float(stats["accept_rate"].mean()) < 0.05:
        notes.append(f"low record acceptance ({float(stats['accept_rate'].mean()):.3g}): the "
                     f"latent records mix slowly; check ess_bulk, run longer or use "
                     f"sweeps_per_iteration > 1")
    if interrupted:
        notes.append(f"interrupted: sampling was stopped early; {length} of {opts['draws']} "
                     f"draws per chain kept (chains truncated to a common length)")
    model_d = _to_dict(p.model)
    release_d = _to_dict(p.release)
    post = Posterior(draws=draws, sample_stats=stats, method="damcmc", model=model_d,
                     release=release_d, notes=notes, exact=True, chain_stats=chain_stats)
    if length:
        flag_convergence(post, stacklevel=4)   # warning + note when R-hat > 1.01 or ESS < 400
    return post


def _pure_epsilon(release):
    """ε of the release's guarantee under replace-one neighbours, if it is pure DP."""
    try:
        priv = release.privacy
    except Exception:  # noqa: BLE001 - informative note only
        return None
    if getattr(priv, "kind", None) != "pure" or priv.epsilon is None:
        return None
    eps = float(priv.epsilon)
    if getattr(priv, "neighbours", "replace") == "add-remove":
        eps *= 2.0  # replace-one = remove + add
    return eps


def _to_dict(obj):
    try:
        return obj.to_dict()
    except Exception:  # noqa: BLE001 - descriptions are informative only
        return None
