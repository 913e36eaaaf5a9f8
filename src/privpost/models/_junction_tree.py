"""Exact inference in discrete clique models by variable elimination on a junction tree.

The model is ``p(x) = exp(sum_C theta_C[x_C] - A(theta))`` over ``T`` categorical variables
(``x_v in 0..K_v-1``) with log-potential tables ``theta_C`` on a fixed list of cliques
(seed 003 extract §1.1). :class:`JunctionTree` is built once per clique structure:

* an elimination order is chosen greedily (min-fill, ties by the smaller clique table) on the
  interaction graph (every model clique a complete subgraph);
* eliminating ``v`` creates the junction-tree clique ``K_v = {v} ∪ S_v`` with ``S_v`` its
  neighbours at that time; ``K_v``'s parent is ``K_u`` for the first-eliminated ``u in S_v``
  (``S_v ⊆ K_u``: the running-intersection property); cliques with ``S_v = ∅`` are roots (one per
  connected component);
* every model clique is assigned to ``K_v`` of its first-eliminated variable (which contains it).

:meth:`JunctionTree.calibrate` runs sum-product in log space (one pass up, one down; the cost is
``O(sum_v prod_{u in K_v} K_u)``, exponential only in the tree width) and returns the exact
``log Z = A(theta)`` and the clique marginals. :meth:`JunctionTree.sample` draws exact records
by ancestral sampling down the tree: roots first, then each ``x_v`` from ``p(x_v | x_{S_v})``.

No approximation is made anywhere; a structure whose largest junction-tree table would exceed
``max_table`` cells is refused with an :class:`~privpost.errors.IncompatibleError` (there is no
loopy-BP fallback).
"""

from __future__ import annotations

import numpy as np

from privpost.errors import IncompatibleError

__all__ = ["JunctionTree", "logsumexp"]


def logsumexp(a, axis=None, keepdims=False):
    """``log(sum(exp(a), axis))``, stable (``scipy.special.logsumexp`` costs ~1 ms a call in
    recent SciPy, which dominated the sampler)."""
    a = np.asarray(a, dtype=np.float64)
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


def _aligned(table: np.ndarray, vars_from: tuple[int, ...], vars_to: tuple[int, ...]) -> np.ndarray:
    """View of ``table`` (axes ``vars_from``) broadcastable over the axes ``vars_to``
    (``vars_from`` ⊆ ``vars_to``; ``vars_to`` sorted)."""
    order = sorted(range(len(vars_from)), key=lambda a: vars_from[a])
    t = np.transpose(table, order)
    present = set(vars_from)
    shape = []
    it = iter(t.shape)
    for v in vars_to:
        shape.append(next(it) if v in present else 1)
    return t.reshape(shape)


class JunctionTree:
    """Junction tree of a clique model (built once; potentials change per call).

    Parameters
    ----------
    cards : sequence of T ints >= 1
        Number of categories of each variable.
    cliques : sequence of tuples of variable indices
        The model cliques (order of variables within a clique = axis order of its table).
    max_table : int
        Largest junction-tree table allowed (cells).

    Attributes
    ----------
    order : list[int]
        Elimination order; clique ``i`` of the tree belongs to variable ``order[i]``.
    jt_vars : list[tuple[int, ...]]
        Variables (sorted) of junction-tree clique ``i``.
    parent : list[int]
        Parent clique index (``-1`` for a root); parents come later in ``order``.
    width : int
        Tree width (largest junction-tree clique size minus one).
    """

    def __init__(self, cards, cliques, *, max_table: int = 10**7):
        self.cards = tuple(int(k) for k in cards)
        self.cliques = tuple(tuple(int(v) for v in c) for c in cliques)
        T = len(self.cards)
        nbrs = [set() for _ in range(T)]
        for c in self.cliques:
            for a in c:
                nbrs[a].update(u for u in c if u != a)
        remaining = set(range(T))
        order, seps = [], []
        adj = [set(s) for s in nbrs]
        while remaining:
            def cost(v):
                nb = adj[v]
                fill = sum(1 for a in nb for b in nb if a < b and b not in adj[a])
                size = int(np.prod([self.cards[u] for u in nb | {v}], dtype=np.float64))
                return (fill, size, v)
            v = min(remaining, key=cost)
            nb = set(adj[v])
            size = float(np.prod([self.cards[u] for u in nb | {v}], dtype=np.float64))
            if size > max_table:
                raise IncompatibleError(
                    f"the clique structure has tree width >= {len(nb)}: exact inference needs a "
                    f"table of {size:.3g} cells (limit {max_table:.3g}); use smaller cliques, "
                    f"fewer levels or a sparser graph")
            for a in nb:
                adj[a].update(nb - {a})
                adj[a].discard(v)
            remaining.discard(v)
            order.append(v)
            seps.append(tuple(sorted(nb)))
        pos = {v: i for i, v in enumerate(order)}
        self.order = order
        self.pos = pos
        self.seps = seps
        self.jt_vars = [tuple(sorted((v,) + s)) for v, s in zip(order, seps)]
        self.parent = [min((pos[u] for u in s), default=-1) for s in seps]
        self.children: list[list[int]] = [[] for _ in order]
        for i, p in enumerate(self.parent):
            if p >= 0:
                self.children[p].append(i)
        self.width = max(len(jv) for jv in self.jt_vars) - 1
        # model clique j -> junction-tree clique of its first-eliminated variable
        self.home = [min(pos[v] for v in c) for c in self.cliques]
        self.roots = [i for i, p in enumerate(self.parent) if p < 0]
        self.comp = [0] * len(order)          # component (root) of each clique
        for i in reversed(range(len(order))):
            self.comp[i] = i if self.parent[i] < 0 else self.comp[self.parent[i]]

    # ------------------------------------------------------------------ inference
    def _potentials(self, log_potentials):
        pots = [np.zeros([self.cards[v] for v in jv]) for jv in self.jt_vars]
        for j, (c, th) in enumerate(zip(self.cliques, log_potentials)):
            i = self.home[j]
            th = np.asarray(th, dtype=np.float64)
            shape = tuple(self.cards[v] for v in c)
            if th.shape != shape:
                raise IncompatibleError(f"log-potential table {j} has shape {th.shape}, "
                                        f"expected {shape}")
            pots[i] = pots[i] + _aligned(th, c, self.jt_vars[i])
        return pots

    def calibrate(self, log_potentials) -> tuple[float, list[np.ndarray]]:
        """Exact ``log Z`` and the junction-tree clique log-marginals.

        Parameters
        ----------
        log_potentials : list of arrays, one per model clique, shape ``(K_v for v in C)``.

        Returns
        -------
        log_z : float
        log_beliefs : list of arrays; entry ``i`` has axes ``jt_vars[i]`` and holds
            ``log p(x_{K_i})`` (normalised).
        """
        pots = self._potentials(log_potentials)
        m = len(pots)
        up = [None] * m                     # message i -> parent, over seps[i]
        acc = list(pots)                    # potential + messages from children
        for i in range(m):                  # children come before parents
            jv = self.jt_vars[i]
            for c in self.children[i]:
                acc[i] = acc[i] + _aligned(up[c], self.seps[c], jv)
            if self.parent[i] >= 0:
                ax = jv.index(self.order[i])
                up[i] = logsumexp(acc[i], axis=ax)        # sum out v_i -> axes seps[i]
        log_z_comp = {r: float(logsumexp(acc[r])) for r in self.roots}
        beliefs = [None] * m
        for i in reversed(range(m)):         # parents before children
            jv = self.jt_vars[i]
            b = acc[i]
            p = self.parent[i]
            if p >= 0:
                # message from parent = parent's belief summed to seps[i], minus up[i]
                pb = beliefs[p]
                pv = self.jt_vars[p]
                drop = tuple(a for a, v in enumerate(pv) if v not in self.seps[i])
                down = logsumexp(pb, axis=drop) - up[i] if drop else pb - up[i]
                b = b + _aligned(down, self.seps[i], jv)
            else:
                b = b - log_z_comp[i]
            beliefs[i] = b
        return float(sum(log_z_comp.values())), beliefs

    def clique_marginals(self, log_potentials) -> tuple[float, list[np.ndarray]]:
        """Exact ``log Z`` and the marginal table ``mu_C`` of every model clique
        (axes in the clique's own variable order; each table sums to 1)."""
        log_z, beliefs = self.calibrate(log_potentials)
        out = []
        for c, i in zip(self.cliques, self.home):
            jv = self.jt_vars[i]
            drop = tuple(a for a, v in enumerate(jv) if v not in c)
            lb = logsumexp(beliefs[i], axis=drop) if drop else beliefs[i]
            kept = [v for v in jv if v in c]
            lb = np.transpose(lb, [kept.index(v) for v in c])
            mu = np.exp(lb)
            out.append(mu / mu.sum())
        return log_z, out

    # ------------------------------------------------------------------ sampling
    def sample(self, log_potentials, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` exact i.i.d. draws, shape ``(n, T)`` int64, by ancestral sampling.

        Uniforms are drawn one variable at a time, in reverse elimination order
        (``rng.random(n)`` per variable).
        """
        _, beliefs = self.calibrate(log_potentials)
        n = int(n)
        x = np.zeros((n, len(self.cards)), dtype=np.int64)
        for i in reversed(range(len(self.order))):
            v = self.order[i]
            jv = self.jt_vars[i]
            sep = self.seps[i]
            # conditional log p(x_v | x_sep): axes (sep..., v)
            lb = np.transpose(beliefs[i], [jv.index(u) for u in sep] + [jv.index(v)])
            lb = lb.reshape(-1, self.cards[v])
            cond = np.exp(lb - logsumexp(lb, axis=1, keepdims=True))
            cdf = np.cumsum(cond, axis=1)
            cdf[:, -1] = 1.0
            if sep:
                row = np.ravel_multi_index(tuple(x[:, u] for u in sep),
                                           tuple(self.cards[u] for u in sep))
            else:
                row = np.zeros(n, dtype=np.int64)
            u = rng.random(n)
            x[:, v] = (cdf[row] < u[:, None]).sum(axis=1)
        return x
