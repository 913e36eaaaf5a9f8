"""Compiled theta kernel of :class:`~privpost.models.mrf.CliqueMRF` given a joint count table
(the count-level latent of ``damcmc``, :func:`privpost.models._count_tables.mrf_table`; issue 21).

The kernel is the one of :meth:`CliqueMRF.update_counts` with a dense mass matrix (see
``mrf.py``'s module docstring), written in Numba so that its cost is that of the arithmetic and
not of NumPy/SciPy calls: one update is

1. an exact Gibbs draw of the unidentified component, ``null = sigma (xi - B B' xi)``,
   ``xi ~ N(0, I_d)`` (``B (d, r)`` the orthonormal basis of the identified subspace);
2. the mass ``M = B' H B + I / sigma^2`` ``(r, r)`` with ``H = A diag(c) A' - (A c)(A c)' / N``
   ``(d, d)`` -- ``A (d, J)`` the model's clique map, ``c (J,)`` the table, ``N = sum c`` -- and
   its lower Cholesky factor ``L`` (a function of the table conditioned on, not of theta, so
   every HMC step with it leaves ``p(theta | c)`` invariant);
3. ``n_steps`` HMC steps on ``z = B' theta`` with target ``z' B' (A c) - N A(B z) -
   ||z||^2 / (2 sigma^2)`` (the log-partition ``A(theta)`` and the clique marginals ``mu(theta)``
   exact, see below), gradient ``B' (A c - N mu(B z)) - z / sigma^2``; momentum ``p = L xi``,
   kinetic energy ``p' M^-1 p / 2`` (two triangular solves), ``n_leapfrog`` leapfrog steps of
   size ``eps U(0.8, 1.2)``, a Metropolis correction;
4. ``theta = B z + null``.

Steps 1 and 3 leave ``p(theta | c)`` invariant (the prior is isotropic, so the components in and
orthogonal to the identified subspace are independent a priori, and only the first meets the
likelihood), so does their composition; ``n_steps`` changes the mixing, not the target.

Exact inference, two compiled forms (no approximation in either):

* **enumeration** over the ``J`` joint values (``J <= CliqueMRF.ENUMERATE_MAX``): the logit of
  cell ``x`` is ``sum_a theta[idx[x, a]]`` (``idx (J, m)`` the flat clique cell of each model
  clique), ``A(theta)`` their log-sum-exp, ``mu`` the softmax summed into the clique cells --
  ``O(J m)`` per gradient;
* the **junction tree** of the model (:class:`~privpost.models._junction_tree.JunctionTree`:
  same elimination order, same tree, same assignment of model cliques) flattened into index
  maps once (:func:`jt_arrays`): sum-product in log space, one pass up and one down, then each
  model clique's marginal summed out of its home clique's belief -- ``O(sum_i |K_i|)`` per
  gradient (the tree's table sizes), not ``O(J)``.

All loops are plain (no BLAS call), so small matrices never wake a BLAS thread pool.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["MRFThetaKernel", "cell_log_potentials", "jt_arrays", "marginals_compiled",
           "model_idx"]


# ============================================================================================
# exact inference
# ============================================================================================

@njit(cache=True, nogil=True)
def cell_log_potentials(theta, idx, lp):
    """``lp (J,)``: the unnormalised log probability ``sum_a theta[idx[x, a]]`` of every joint
    value ``x``; returns their maximum (for a stable log-sum-exp)."""
    J, m = idx.shape
    mx = -np.inf
    for x in range(J):
        v = 0.0
        for a in range(m):
            v += theta[idx[x, a]]
        lp[x] = v
        if v > mx:
            mx = v
    return mx


@njit(cache=True, nogil=True)
def _enum_marginals(theta, idx, mu):
    """Enumeration: writes the clique marginals into ``mu (d,)``; returns ``A(theta)``."""
    J, m = idx.shape
    lp = np.empty(J)
    mx = cell_log_potentials(theta, idx, lp)
    tot = 0.0
    for x in range(J):
        lp[x] = math.exp(lp[x] - mx)
        tot += lp[x]
    for k in range(mu.shape[0]):
        mu[k] = 0.0
    for x in range(J):
        p = lp[x] / tot
        for a in range(m):
            mu[idx[x, a]] += p
    return mx + math.log(tot)


@njit(cache=True, nogil=True)
def _group_lse(vals, base, size, group, n_groups, out, work):
    """``out[g] = log sum_{cell: group[cell] = g} exp(vals[base + cell])`` (``work`` (>= n_groups))."""
    for g in range(n_groups):
        out[g] = -np.inf
    for cell in range(size):
        v = vals[base + cell]
        g = group[cell]
        if v > out[g]:
            out[g] = v
    for g in range(n_groups):
        work[g] = 0.0
    for cell in range(size):
        g = group[cell]
        if out[g] > -np.inf:
            work[g] += math.exp(vals[base + cell] - out[g])
    for g in range(n_groups):
        if out[g] > -np.inf:
            out[g] += math.log(work[g])


@njit(cache=True, nogil=True)
def _range_lse(vals, base, size):
    """``log sum_{cell < size} exp(vals[base + cell])`` (max-shifted; a root clique's
    normaliser in :func:`_jt_marginals`)."""
    mx = -np.inf
    for cell in range(size):
        if vals[base + cell] > mx:
            mx = vals[base + cell]
    tot = 0.0
    for cell in range(size):
        tot += math.exp(vals[base + cell] - mx)
    return mx + math.log(tot)


@njit(cache=True, nogil=True)
def _jt_marginals(theta, jt_size, jt_off, parent, sep_size, sep_off, child_map, par_map,
                  par_off, home, t_off, t_map, mu, acc, bel, up, work):
    """Junction tree: writes the clique marginals into ``mu (d,)``; returns ``A(theta)``.

    ``jt_size, jt_off (n_jt,)``: cells of each junction-tree clique and its offset in the flat
    tables ``acc, bel (S,)``; ``parent (n_jt,)`` (-1: root; children come first);
    ``sep_size, sep_off (n_jt,)``: the separator to the parent and its offset in ``up``;
    ``child_map (S,)``: each cell's separator cell (its own separator); ``par_map``: for child
    ``i``, the separator cell of each of its parent's cells, at ``par_off[i]``; ``home (m,)``,
    ``t_off (m,)``, ``t_map``: model clique ``j``'s home clique and, for each cell of the home,
    the flat theta index of ``j``'s cell it contains (at ``t_off[j]``)."""
    n_jt = jt_size.shape[0]
    m = home.shape[0]
    for k in range(acc.shape[0]):
        acc[k] = 0.0
    for j in range(m):
        i = home[j]
        b = jt_off[i]
        o = t_off[j]
        for cell in range(jt_size[i]):
            acc[b + cell] += theta[t_map[o + cell]]
    log_z = 0.0
    for i in range(n_jt):                       # children before parents
        b = jt_off[i]
        p = parent[i]
        if p >= 0:
            so = sep_off[i]
            msg = up[so:so + sep_size[i]]
            _group_lse(acc, b, jt_size[i], child_map[b:b + jt_size[i]], sep_size[i], msg,
                       work)
            bp = jt_off[p]
            po = par_off[i]
            for cell in range(jt_size[p]):
                acc[bp + cell] += msg[par_map[po + cell]]
        else:
            log_z += _range_lse(acc, b, jt_size[i])
    for i in range(n_jt - 1, -1, -1):          # parents before children
        b = jt_off[i]
        p = parent[i]
        if p < 0:
            lz = _range_lse(acc, b, jt_size[i])     # the root's share of log_z (acc unchanged)
            for cell in range(jt_size[i]):
                bel[b + cell] = acc[b + cell] - lz
        else:
            ns = sep_size[i]
            so = sep_off[i]
            down = work[ns:2 * ns]
            _group_lse(bel, jt_off[p], jt_size[p], par_map[par_off[i]:par_off[i] + jt_size[p]],
                       ns, down, work)
            for g in range(ns):
                down[g] -= up[so + g]
            for cell in range(jt_size[i]):
                bel[b + cell] = acc[b + cell] + down[child_map[b + cell]]
    for k in range(mu.shape[0]):
        mu[k] = 0.0
    for j in range(m):
        i = home[j]
        b = jt_off[i]
        o = t_off[j]
        for cell in range(jt_size[i]):
            mu[t_map[o + cell]] += math.exp(bel[b + cell])
    return log_z


@njit(cache=True, nogil=True)
def _marginals(theta, mu, use_jt, idx, jt_size, jt_off, parent, sep_size, sep_off, child_map,
               par_map, par_off, home, t_off, t_map, acc, bel, up, work):
    if use_jt:
        return _jt_marginals(theta, jt_size, jt_off, parent, sep_size, sep_off, child_map,
                             par_map, par_off, home, t_off, t_map, mu, acc, bel, up, work)
    return _enum_marginals(theta, idx, mu)


def jt_arrays(model) -> tuple:
    """The junction tree of ``model`` (a CliqueMRF) as flat index arrays for
    :func:`_jt_marginals`: ``(jt_size, jt_off, parent, sep_size, sep_off, child_map, par_map,
    par_off, home, t_off, t_map, S, max_sep)``. Cells of every table are numbered row-major over
    their variables in the order the tree keeps them (``jt_vars``, sorted; model cliques in
    their own variable order, as the model's flat ``theta``)."""
    jt = model.jt
    cards = jt.cards
    n_jt = len(jt.jt_vars)

    def cells_of(vars_):
        """(size, (size, len(vars)) values of the variables at each cell)."""
        shape = tuple(cards[v] for v in vars_)
        size = int(np.prod(shape, dtype=np.int64)) if vars_ else 1
        vals = np.indices(shape).reshape(len(vars_), -1).T if vars_ else np.zeros((1, 0), int)
        return size, vals

    def index_in(sub, vars_, vals):
        """Flat cell of the sub-table ``sub`` (variables in that order) at each row of ``vals``
        (values of ``vars_``)."""
        out = np.zeros(vals.shape[0], dtype=np.int64)
        for v in sub:
            out = out * cards[v] + vals[:, vars_.index(v)]
        return out

    jt_size = np.zeros(n_jt, dtype=np.int64)
    vals = []
    for i, jv in enumerate(jt.jt_vars):
        jt_size[i], vv = cells_of(list(jv))
        vals.append(vv)
    jt_off = np.concatenate([[0], np.cumsum(jt_size)[:-1]]).astype(np.int64)
    S = int(jt_size.sum())
    parent = np.asarray(jt.parent, dtype=np.int64)
    sep_size = np.zeros(n_jt, dtype=np.int64)
    child_map = np.zeros(S, dtype=np.int64)
    par_parts, par_off, o = [], np.zeros(n_jt, dtype=np.int64), 0
    for i in range(n_jt):
        sep = list(jt.seps[i])
        sep_size[i] = int(np.prod([cards[v] for v in sep], dtype=np.int64)) if sep else 1
        if parent[i] >= 0:
            child_map[jt_off[i]:jt_off[i] + jt_size[i]] = index_in(sep, list(jt.jt_vars[i]),
                                                                   vals[i])
            p = parent[i]
            par_parts.append(index_in(sep, list(jt.jt_vars[p]), vals[p]))
            par_off[i] = o
            o += int(jt_size[p])
    par_map = np.concatenate(par_parts).astype(np.int64) if par_parts else np.zeros(1, np.int64)
    sep_off = np.concatenate([[0], np.cumsum(sep_size)[:-1]]).astype(np.int64)
    home = np.asarray(jt.home, dtype=np.int64)
    t_parts, t_off, o = [], np.zeros(len(model.cliques), dtype=np.int64), 0
    for j, c in enumerate(model.cliques):
        i = int(home[j])
        t_parts.append(model.offsets[j] + index_in(list(c), list(jt.jt_vars[i]), vals[i]))
        t_off[j] = o
        o += int(jt_size[i])
    t_map = np.concatenate(t_parts).astype(np.int64)
    return (jt_size, jt_off, parent, sep_size, sep_off, child_map, par_map, par_off, home,
            t_off, t_map, S, int(sep_size.max()))


# ============================================================================================
# the HMC kernel
# ============================================================================================

@njit(cache=True, nogil=True)
def _logp_grad(z, B, counts, N, inv_s2, theta, mu, grad, use_jt, idx, jt_size, jt_off, parent,
               sep_size, sep_off, child_map, par_map, par_off, home, t_off, t_map, acc, bel,
               up, work):
    """``log p(z | c)`` up to a constant; its gradient into ``grad (r,)``."""
    d, r = B.shape
    for a in range(d):
        v = 0.0
        for k in range(r):
            v += B[a, k] * z[k]
        theta[a] = v
    log_z = _marginals(theta, mu, use_jt, idx, jt_size, jt_off, parent, sep_size, sep_off,
                       child_map, par_map, par_off, home, t_off, t_map, acc, bel, up, work)
    val = 0.0
    for a in range(d):
        val += theta[a] * counts[a]
        mu[a] = counts[a] - N * mu[a]          # mu now holds the d-space gradient
    zz = 0.0
    for k in range(r):
        grad[k] = -z[k] * inv_s2
        zz += z[k] * z[k]
    for a in range(d):
        g = mu[a]
        if g != 0.0:
            for k in range(r):
                grad[k] += B[a, k] * g
    return val - N * log_z - 0.5 * zz * inv_s2


@njit(cache=True, nogil=True)
def _table_mass(c, idx, B, inv_s2, counts, L):
    """``counts = A c (d,)``; ``L (r, r)``: lower Cholesky factor of ``B'HB + I/sigma^2``,
    ``H = A diag(c) A' - (A c)(A c)' / N`` (occupied cells only). Returns ``N``."""
    J, m = idx.shape
    d, r = B.shape
    H = np.zeros((d, d))
    for a in range(d):
        counts[a] = 0.0
    N = 0.0
    for x in range(J):
        cx = c[x]
        if cx != 0.0:
            N += cx
            for a in range(m):
                ia = idx[x, a]
                counts[ia] += cx
                for b in range(m):
                    H[ia, idx[x, b]] += cx
    if N > 0.0:
        for a in range(d):
            ca = counts[a] / N
            if ca != 0.0:
                for b in range(d):
                    H[a, b] -= ca * counts[b]
    HB = np.zeros((d, r))
    for a in range(d):
        for b in range(d):
            h = H[a, b]
            if h != 0.0:
                for k in range(r):
                    HB[a, k] += h * B[b, k]
    M = np.zeros((r, r))
    for a in range(d):
        for k in range(r):
            bak = B[a, k]
            if bak != 0.0:
                for l in range(k + 1):
                    M[k, l] += bak * HB[a, l]
    for k in range(r):
        M[k, k] += inv_s2
    for k in range(r):                          # Cholesky (lower), in place of L
        for l in range(k + 1):
            s = M[k, l]
            for q in range(l):
                s -= L[k, q] * L[l, q]
            if k == l:
                L[k, k] = math.sqrt(max(s, 1e-300))
            else:
                L[k, l] = s / L[l, l]
        for l in range(k + 1, r):
            L[k, l] = 0.0
    return N


@njit(cache=True, nogil=True)
def _minv(L, v, out):
    """``out = (L L')^-1 v`` (forward then backward substitution)."""
    r = v.shape[0]
    for k in range(r):
        s = v[k]
        for q in range(k):
            s -= L[k, q] * out[q]
        out[k] = s / L[k, k]
    for k in range(r - 1, -1, -1):
        s = out[k]
        for q in range(k + 1, r):
            s -= L[q, k] * out[q]
        out[k] = s / L[k, k]


@njit(cache=True, nogil=True)
def theta_update(theta, c, B, sigma, eps, n_leapfrog, n_steps, use_jt, idx, jt_size, jt_off,
                 parent, sep_size, sep_off, child_map, par_map, par_off, home, t_off, t_map,
                 S, max_sep, rng):
    """One theta update given the joint table ``c (J,)`` float64 (module docstring), in place
    on ``theta (d,)``: the clique counts ``A c`` and the table mass (:func:`_table_mass`), then
    :func:`hmc_update`. Returns the mean acceptance probability of the steps."""
    d, r = B.shape
    counts = np.empty(d)
    L = np.zeros((r, r))
    N = _table_mass(c, idx, B, 1.0 / (sigma * sigma), counts, L)
    return hmc_update(theta, counts, N, L, B, sigma, eps, n_leapfrog, n_steps, use_jt, idx,
                      jt_size, jt_off, parent, sep_size, sep_off, child_map, par_map, par_off,
                      home, t_off, t_map, S, max_sep, rng)


@njit(cache=True, nogil=True)
def hmc_update(theta, counts, N, L, B, sigma, eps, n_leapfrog, n_steps, use_jt, idx, jt_size,
               jt_off, parent, sep_size, sep_off, child_map, par_map, par_off, home, t_off,
               t_map, S, max_sep, rng):
    """One theta update given the clique counts ``counts (d,)`` of ``N`` records and the lower
    Cholesky factor ``L (r, r)`` of the mass, in place on ``theta (d,)`` (steps 1, 3, 4 of the
    module docstring). ``B (d, r)``; ``sigma`` the prior sd; ``eps`` the HMC step before its
    +-20 % jitter; ``n_leapfrog``, ``n_steps`` >= 1. Returns the mean over the steps of
    ``min(1, exp(H1 - H0))`` (0 for a non-finite proposal).

    Draws from ``rng``: ``standard_normal(d)`` (the unidentified part), then per step
    ``standard_normal(r)`` (momentum), ``uniform(0.8, 1.2)`` (jitter), ``random()`` (test) --
    the order of :meth:`CliqueMRF.update_counts`, whose kernel this is."""
    d, r = B.shape
    inv_s2 = 1.0 / (sigma * sigma)
    xi = rng.standard_normal(d)
    bxi = np.zeros(r)
    z = np.zeros(r)
    for a in range(d):
        for k in range(r):
            bxi[k] += B[a, k] * xi[a]
            z[k] += B[a, k] * theta[a]
    null = np.empty(d)
    for a in range(d):
        v = xi[a]
        for k in range(r):
            v -= B[a, k] * bxi[k]
        null[a] = sigma * v
    th = np.empty(d)
    mu = np.empty(d)
    acc = np.empty(max(S, 1))
    bel = np.empty(max(S, 1))
    up = np.empty(max(S, 1))
    work = np.empty(2 * max_sep + 2)
    g = np.empty(r)
    p = np.empty(r)
    pn = np.empty(r)
    zn = np.empty(r)
    mv = np.empty(r)
    acc_sum = 0.0
    lp0 = _logp_grad(z, B, counts, N, inv_s2, th, mu, g, use_jt, idx, jt_size, jt_off, parent,
                     sep_size, sep_off, child_map, par_map, par_off, home, t_off, t_map, acc,
                     bel, up, work)
    g0 = g.copy()
    for _ in range(n_steps):
        xi_r = rng.standard_normal(r)
        for k in range(r):
            v = 0.0
            for q in range(k + 1):
                v += L[k, q] * xi_r[q]
            p[k] = v
        e = eps * rng.uniform(0.8, 1.2)
        _minv(L, p, mv)
        ke = 0.0
        for k in range(r):
            ke += p[k] * mv[k]
        h0 = lp0 - 0.5 * ke
        for k in range(r):
            zn[k] = z[k]
            pn[k] = p[k] + 0.5 * e * g0[k]
        lp1 = lp0
        for stp in range(n_leapfrog):
            _minv(L, pn, mv)
            for k in range(r):
                zn[k] += e * mv[k]
            lp1 = _logp_grad(zn, B, counts, N, inv_s2, th, mu, g, use_jt, idx, jt_size, jt_off,
                             parent, sep_size, sep_off, child_map, par_map, par_off, home,
                             t_off, t_map, acc, bel, up, work)
            w = e if stp < n_leapfrog - 1 else 0.5 * e
            for k in range(r):
                pn[k] += w * g[k]
        _minv(L, pn, mv)
        ke = 0.0
        for k in range(r):
            ke += pn[k] * mv[k]
        h1 = lp1 - 0.5 * ke
        ok = np.isfinite(h1)
        acc_sum += math.exp(min(0.0, h1 - h0)) if ok else 0.0
        if ok and math.log(rng.random()) < h1 - h0:
            lp0 = lp1
            for k in range(r):
                z[k] = zn[k]
                g0[k] = g[k]
    for a in range(d):
        v = null[a]
        for k in range(r):
            v += B[a, k] * z[k]
        theta[a] = v
    return acc_sum / n_steps


@njit(cache=True, nogil=True)
def marginals_compiled(theta, use_jt, idx, jt_size, jt_off, parent, sep_size, sep_off,
                       child_map, par_map, par_off, home, t_off, t_map, S, max_sep):
    """``(A(theta), mu (d,))`` by the compiled inference (for tests and the log cell
    probabilities)."""
    mu = np.empty(theta.shape[0])
    acc = np.empty(max(S, 1))
    bel = np.empty(max(S, 1))
    up = np.empty(max(S, 1))
    work = np.empty(2 * max_sep + 2)
    a = _marginals(theta, mu, use_jt, idx, jt_size, jt_off, parent, sep_size, sep_off,
                   child_map, par_map, par_off, home, t_off, t_map, acc, bel, up, work)
    return a, mu


def model_idx(model) -> np.ndarray:
    """``(J, m)`` int64: the model's flat clique cell of each (joint cell, model clique), joint
    cells row-major (:func:`privpost.models._count_tables.joint_domain`'s order)."""
    grids = np.indices(tuple(model.levels)).reshape(len(model.levels), -1).T
    return np.stack([o + grids[:, list(c)] @ st for c, st, o in
                     zip(model.cliques, model._strides, model.offsets)], axis=1).astype(np.int64)


class MRFThetaKernel:
    """The compiled theta update of a CliqueMRF given its joint count table.

    Parameters
    ----------
    model : CliqueMRF
    idx : (J, m) int64 or None
        The model's flat clique cell of each (joint cell, model clique) (joint cells row-major,
        as :func:`privpost.models._count_tables.joint_domain`); ``None``: :func:`model_idx`
        where the model enumerates (the junction-tree path needs it only for a table's mass).
    use_jt : bool or None
        Exact inference by the junction tree (True) or by enumeration over the ``J`` joint
        values (False); ``None``: the model's own choice (enumeration when it keeps a design
        matrix, i.e. ``J <= CliqueMRF.ENUMERATE_MAX``).
    n_steps : int >= 1
        HMC steps per update (sharing one mass matrix and one draw of the unidentified part).
    """

    def __init__(self, model, idx=None, use_jt=None, n_steps: int = 1):
        self.model = model
        if idx is None:
            idx = model_idx(model) if model._design is not None else np.zeros((1, 1), np.int64)
        self.idx = np.ascontiguousarray(idx, dtype=np.int64)
        if use_jt is None:
            use_jt = model._design is None
        self.use_jt = bool(use_jt)
        self.B = np.ascontiguousarray(model.identified_basis()[0], dtype=np.float64)
        self.n_steps = int(n_steps)
        if self.use_jt:
            self.jt = jt_arrays(model)
        else:
            z = np.zeros(1, dtype=np.int64)
            self.jt = (z, z, z, z, z, z, z, z, np.zeros(len(model.cliques), np.int64),
                       np.zeros(len(model.cliques), np.int64), z, 0, 0)

    def update(self, theta, c, rng, eps=None, n_steps=None) -> tuple[np.ndarray, float]:
        """``(new theta (d,), mean acceptance probability)`` after one update given the joint
        table ``c (J,)``; ``eps``: the HMC step (default the model's ``step_size``)."""
        m = self.model
        th = np.array(theta, dtype=np.float64)
        a = theta_update(th, np.ascontiguousarray(c, dtype=np.float64), self.B,
                         float(m.prior_sd), float(m.step_size if eps is None else eps),
                         int(m.n_leapfrog), int(self.n_steps if n_steps is None else n_steps),
                         self.use_jt, self.idx, *self.jt, rng)
        return th, float(a)

    def update_counts(self, theta, counts, N, L, rng, eps=None) -> tuple[np.ndarray, float]:
        """``(new theta (d,), acceptance probability)`` after one update (``n_steps`` HMC
        steps) given the clique counts ``counts (d,)`` of ``N`` records and the lower Cholesky
        factor ``L (r, r)`` of the mass (:meth:`CliqueMRF.update_counts`)."""
        m = self.model
        th = np.array(theta, dtype=np.float64)
        a = hmc_update(th, np.ascontiguousarray(counts, dtype=np.float64), float(N),
                       np.ascontiguousarray(L, dtype=np.float64), self.B, float(m.prior_sd),
                       float(m.step_size if eps is None else eps), int(m.n_leapfrog),
                       int(self.n_steps), self.use_jt, self.idx, *self.jt, rng)
        return th, float(a)

    def marginals(self, theta) -> tuple[float, np.ndarray]:
        """``(A(theta), mu (d,))`` by the compiled inference."""
        return marginals_compiled(np.ascontiguousarray(theta, dtype=np.float64), self.use_jt,
                                  self.idx, *self.jt)
