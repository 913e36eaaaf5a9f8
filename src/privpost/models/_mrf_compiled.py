"""Compiled (Numba) ``update`` / ``simulate`` of :class:`~privpost.models.mrf.CliqueMRF` for the
DA-MCMC fast path (the protocol of :mod:`privpost.inference._damcmc_fast`:
``model.compiled_model()`` returns a ``CompiledModel``; the records' contributions come from
:meth:`privpost.queries.marginal_tables.MarginalTables.compiled_t`).

Scope: models whose joint state space ``J = prod(levels)`` is small enough for the model's own
enumeration path (``J <= CliqueMRF.ENUMERATE_MAX``). There exact inference is two dense
mat-vecs, which compile cleanly. Larger models (exact inference by the junction tree, whose
message passing is Python over a variable number of tables) get ``None`` and stay on the
generic path -- that is also where the record sweep is not the bottleneck, since each parameter
update costs ``n_leapfrog + 1`` junction-tree calibrations.

The kernel is the model's Python :meth:`~privpost.models.mrf.CliqueMRF.update_counts`, written
for the enumerated case, with the same draws in the same order from the ``Generator``
(``standard_normal(d)`` for the unidentified part, ``standard_normal(r)`` for the momentum,
``uniform(0.8, 1.2)`` for the step jitter, ``random()`` for the Metropolis test):

* records ``(m, T)`` float64 -> joint-state histogram ``h (J,)`` (joint index
  ``sum_v x_v * prod(levels[v+1:])``, the row order of ``np.ndindex``, i.e. of the model's
  design matrix ``D (J, d)``);
* with ``E = D B (J, r)`` (``B`` the identified basis), the log-posterior of ``z = B'theta`` is
  ``h'(E z) - N logsumexp(E z) - ||z||^2 / (2 sigma^2)`` -- identical to
  ``theta'counts - N A(theta) - ||theta||^2/(2 sigma^2)`` at ``theta = B z`` because
  ``counts = D'h`` and ``D theta`` are the joint log-potentials -- with gradient
  ``E'(h - N p) - z / sigma^2``, ``p = softmax(E z)``;
* HMC on ``z`` with the diagonal mass ``N lambda_k + 1/sigma^2`` (as in Python), then
  ``theta = B z + sigma (xi - B B' xi)``.

``simulate`` draws joint states by inversion of the cumulative ``softmax(D theta)`` (the
Python ``simulate`` does the same with ``searchsorted``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

try:  # the protocol's container lives with the DA-MCMC engine
    from privpost.inference._damcmc_fast import CompiledModel
except ImportError:  # pragma: no cover - engine absent: no fast path
    CompiledModel = None

__all__ = ["mrf_compiled"]

_CACHE: dict = {}


@njit(nogil=True)
def _logp_grad(z, E, h, N, inv_s2, grad):
    """Log-posterior of ``z`` (up to a constant); writes its gradient into ``grad``."""
    J, r = E.shape
    lp = E @ z
    mx = lp.max()
    tot = 0.0
    for j in range(J):
        tot += math.exp(lp[j] - mx)
    a = mx + math.log(tot)
    val = 0.0
    w = np.empty(J)
    for j in range(J):
        val += h[j] * lp[j]
        w[j] = h[j] - N * math.exp(lp[j] - a)
    g = E.T @ w
    zz = 0.0
    for k in range(r):
        grad[k] = g[k] - z[k] * inv_s2
        zz += z[k] * z[k]
    return val - N * a - 0.5 * zz * inv_s2


def _build(D, dom, B, lam, jst, sigma, step_size, n_leapfrog):
    D = np.ascontiguousarray(D, dtype=np.float64)
    dom_f = np.ascontiguousarray(dom, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    E = np.ascontiguousarray(D @ B)
    lam = np.ascontiguousarray(lam, dtype=np.float64)
    jst = np.ascontiguousarray(jst, dtype=np.int64)
    J, d = D.shape
    r = B.shape[1]
    T = dom.shape[1]
    s = float(sigma)
    inv_s2 = 1.0 / (s * s)
    step = float(step_size)
    L = int(n_leapfrog)

    @njit(nogil=True)
    def update(theta, records, rng):
        m = records.shape[0]
        h = np.zeros(J)
        for i in range(m):
            j = 0
            for v in range(T):
                j += int(records[i, v]) * jst[v]
            h[j] += 1.0
        N = float(m)
        xi = rng.standard_normal(d)
        bxi = B.T @ xi
        null = s * (xi - B @ bxi)
        z = B.T @ theta
        minv = np.empty(r)
        p = rng.standard_normal(r)
        for k in range(r):
            minv[k] = 1.0 / (N * lam[k] + inv_s2)
            p[k] = p[k] / math.sqrt(minv[k])
        eps = step * rng.uniform(0.8, 1.2)
        g = np.empty(r)
        lp0 = _logp_grad(z, E, h, N, inv_s2, g)
        ke = 0.0
        for k in range(r):
            ke += p[k] * p[k] * minv[k]
        h0 = lp0 - 0.5 * ke
        zn = z.copy()
        pn = p.copy()
        for k in range(r):
            pn[k] += 0.5 * eps * g[k]
        lp1 = lp0
        for stp in range(L):
            for k in range(r):
                zn[k] += eps * minv[k] * pn[k]
            lp1 = _logp_grad(zn, E, h, N, inv_s2, g)
            if stp < L - 1:
                for k in range(r):
                    pn[k] += eps * g[k]
        ke = 0.0
        for k in range(r):
            pn[k] += 0.5 * eps * g[k]
            ke += pn[k] * pn[k] * minv[k]
        h1 = lp1 - 0.5 * ke
        if np.isfinite(h1) and math.log(rng.random()) < h1 - h0:
            z = zn
        new = B @ z
        for c in range(d):
            theta[c] = new[c] + null[c]

    @njit(nogil=True)
    def simulate(theta, out, rng):
        lp = D @ theta
        mx = lp.max()
        cdf = np.empty(J)
        acc = 0.0
        for j in range(J):
            acc += math.exp(lp[j] - mx)
            cdf[j] = acc
        for i in range(out.shape[0]):
            u = rng.random() * acc
            lo, hi = 0, J - 1          # first j with cdf[j] > u
            while lo < hi:
                mid = (lo + hi) // 2
                if cdf[mid] > u:
                    hi = mid
                else:
                    lo = mid + 1
            for v in range(T):
                out[i, v] = dom_f[lo, v]

    return update, simulate, T


def mrf_compiled(model):
    """The :class:`CompiledModel` of ``model`` (a CliqueMRF), or ``None`` when its joint space is
    too large to enumerate (generic path) or the engine is absent. Cached per hyperparameters."""
    if CompiledModel is None or model._design is None:
        return None
    key = ("mrf", model.levels, model.cliques, model.prior_sd, model.step_size,
           model.n_leapfrog)
    cm = _CACHE.get(key)
    if cm is None:
        B, lam = model.identified_basis()
        lv = np.asarray(model.levels, dtype=np.int64)
        jst = np.ones(lv.size, dtype=np.int64)
        for v in range(lv.size - 2, -1, -1):
            jst[v] = jst[v + 1] * lv[v + 1]
        upd, sim, width = _build(model._design, model._dom, B, lam, jst, model.prior_sd,
                                 model.step_size, model.n_leapfrog)
        cm = CompiledModel(record_width=width, update=upd, simulate=sim)
        _CACHE[key] = cm
    return cm
