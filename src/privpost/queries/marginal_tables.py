"""Clique marginal (contingency) tables of categorical records: the release of seed 003 ch. 3.

:class:`MarginalTables` releases, for every clique ``C`` of a fixed list of variable subsets,
the contingency table ``n_C(i_C) = #{records with x_C = i_C}`` (extract §1.1), flattened and
concatenated clique by clique. It is registered in :data:`privpost.queries.QUERIES` as
``"marginal_tables"``. :func:`project_simplex` is the Euclidean projection onto the probability
simplex used by the noise-naive MLE (extract §1.3, step 2; Duchi et al. 2008).

Example::

    >>> import numpy as np
    >>> from privpost.queries import MarginalTables
    >>> q = MarginalTables(levels=[2, 2, 3], cliques=[[0, 1], [1, 2]])
    >>> q.dim, q.sensitivity("l1"), q.sensitivity("l1", "add-remove")
    (10, 4.0, 2.0)
    >>> q.statistic(np.array([[0, 1, 2], [1, 1, 0]])).astype(int).tolist()
    [0, 1, 0, 1, 0, 0, 0, 1, 0, 1]
"""

from __future__ import annotations

import numbers

import numpy as np

from privpost.errors import ReleaseError
from privpost.queries.base import (Query, _category_table, _columns, _field,
                                   _one_hot_sensitivity, _pos_int)

__all__ = ["MarginalTables", "project_simplex", "MAX_CELLS"]

#: Largest total number of released cells accepted (bounds every allocation made from the
#: public parameters: a release of 10^6 cells is already far beyond any sensible table).
MAX_CELLS = 1_000_000


def _parse_cliques(cliques, columns: tuple[str, ...] | None, T: int) -> tuple[tuple[int, ...], ...]:
    """Cliques as tuples of variable indices (names resolved against ``columns``)."""
    if isinstance(cliques, (str, bytes)) or not hasattr(cliques, "__iter__"):
        raise ReleaseError(_field("cliques"),
                           f"must be a list of cliques, each a list of variable indices or column "
                           f"names, e.g. [[0, 1], [1, 2]]; got {cliques!r}")
    out = []
    seen = set()
    for j, c in enumerate(cliques):
        if isinstance(c, (str, bytes)) or not hasattr(c, "__iter__"):
            c = [c]
        idx = []
        for v in c:
            if isinstance(v, str):
                if columns is None or v not in columns:
                    raise ReleaseError(_field("cliques"),
                                       f"clique {j} names column {v!r}, which is not among "
                                       f"the columns {list(columns or ())}")
                idx.append(columns.index(v))
            elif isinstance(v, numbers.Integral) and not isinstance(v, bool):
                if not 0 <= int(v) < T:
                    raise ReleaseError(_field("cliques"),
                                       f"clique {j} has variable {v}, outside 0..{T - 1}")
                idx.append(int(v))
            else:
                raise ReleaseError(_field("cliques"),
                                   f"clique {j}: entries must be variable indices or column "
                                   f"names, got {v!r}")
        if not idx:
            raise ReleaseError(_field("cliques"), f"clique {j} is empty")
        if len(set(idx)) != len(idx):
            raise ReleaseError(_field("cliques"), f"clique {j} repeats a variable: {idx}")
        key = frozenset(idx)
        if key in seen:
            raise ReleaseError(_field("cliques"), f"clique {j} ({idx}) is listed twice")
        seen.add(key)
        out.append(tuple(idx))
    if not out:
        raise ReleaseError(_field("cliques"), "needs at least one clique")
    return tuple(out)


class MarginalTables(Query):
    """Contingency tables of categorical records over a fixed list of cliques.

    Records: ``(n, T)`` integers, column ``v`` in ``0..levels[v]-1`` (int64, or floats with
    integral values, as read from a CSV).

    Released: for every clique ``C = (v_1, ..., v_m)`` (in the order given) the table
    ``n_C[i_1, ..., i_m] = #{r : x_{r, v_1} = i_1, ..., x_{r, v_m} = i_m}``, flattened row-major
    (``v_1`` outermost), tables concatenated in clique order: ``d = sum_C prod_{v in C} K_v``.
    Each record adds exactly one count to each of the ``|𝒞|`` tables (extract §1.2).

    Sensitivity (``|𝒞|`` = number of cliques; every table has >= 2 cells since ``K_v >= 2``).

    * replace-one (the default; the seed's stated neighbour relation): replacing ``r`` by ``r'``
      moves the record's unit count in table ``C`` from cell ``r_C`` to ``r'_C``: a change
      ``+1, -1`` in two cells when ``r_C != r'_C``, nothing otherwise. Summed over the tables,
      L1 ``<= 2|𝒞|`` and L2 ``<= sqrt(2|𝒞|)``; both attained by ``r, r'`` differing in every
      variable. This is **2|𝒞|**, not the thesis's ``|𝒞|`` (Prop. 2), which is the add/remove
      value (extract §1.2 caveat, pitfall 1).
    * add/remove: one count in each table: L1 = ``|𝒞|``, L2 = ``sqrt(|𝒞|)``, tight.

    ``tests/test_marginal_tables.py`` checks all four by brute force over the whole record domain.

    Parameters
    ----------
    levels : sequence of T ints >= 2
        ``K_v``, the number of categories of each variable.
    cliques : list of lists
        Each clique lists distinct variable indices ``0..T-1`` or column names. No clique twice.
    columns : sequence of T str, optional
        Record field names (default ``x0..x{T-1}``).
    """

    name = "marginal_tables"
    _init_fields = ("levels", "cliques", "columns")
    _required_fields = ("levels", "cliques")

    def __init__(self, levels, cliques, *, columns=None):
        if isinstance(levels, (str, bytes)) or not hasattr(levels, "__iter__"):
            raise ReleaseError(_field("levels"), f"must be a list of category counts (one per "
                                                 f"column, each >= 2), got {levels!r}")
        lv = tuple(_pos_int(k, "levels", minimum=2) for k in levels)
        if not lv:
            raise ReleaseError(_field("levels"), "needs at least one variable")
        big = [k for k in lv if k > MAX_CELLS]      # (also a variable in no clique: int64 below)
        if big:
            raise ReleaseError(_field("levels"), f"{big[0]} levels is more than the {MAX_CELLS:,} "
                               "cells a table may have")
        self.levels = lv
        T = len(lv)
        self.columns = _columns(columns, tuple(f"x{v}" for v in range(T)))
        self.cliques = _parse_cliques(cliques, self.columns, T)
        sizes = []
        for c in self.cliques:
            size = 1
            for v in c:
                size *= lv[v]
                if size > MAX_CELLS:
                    break
            sizes.append(size)
        if sum(sizes) > MAX_CELLS:
            raise ReleaseError(_field("cliques"),
                               f"the tables would have {sum(sizes):,} cells or more; at most "
                               f"{MAX_CELLS:,} are supported (use smaller cliques or fewer levels)")
        self.table_sizes = tuple(sizes)
        self.offsets = tuple(int(o) for o in np.concatenate([[0], np.cumsum(sizes)[:-1]]))
        self.dim = int(sum(sizes))
        self.integer = True
        labels = []
        for c in self.cliques:
            names = [self.columns[v] for v in c]
            for cell in np.ndindex(*[lv[v] for v in c]):
                labels.append("n[" + ",".join(f"{nm}={i}" for nm, i in zip(names, cell)) + "]")
        self.labels = tuple(labels)
        # cell index of a record in table j: offset_j + sum_v x_v * stride_{j,v}
        self._strides = []
        for c in self.cliques:
            st = np.ones(len(c), dtype=np.int64)
            for a in range(len(c) - 2, -1, -1):
                st[a] = st[a + 1] * lv[c[a + 1]]
            self._strides.append(st)
        self._levels_arr = np.asarray(lv, dtype=np.int64)

    # ---- tables -----------------------------------------------------------------------------
    def table_shapes(self) -> list[tuple[int, ...]]:
        """Shape of each clique's table (``tuple(K_v for v in C)``)."""
        return [tuple(self.levels[v] for v in c) for c in self.cliques]

    def split(self, values) -> list[np.ndarray]:
        """Released vector ``(..., d)`` -> list of per-clique tables ``(..., *table_shape)``."""
        v = np.asarray(values, dtype=np.float64)
        lead = v.shape[:-1]
        return [v[..., o:o + s].reshape(lead + sh)
                for o, s, sh in zip(self.offsets, self.table_sizes, self.table_shapes())]

    def cells(self, x: np.ndarray) -> np.ndarray:
        """``(n, |𝒞|)`` int64: flat index (into the released vector) of each record's cell."""
        x = np.asarray(x, dtype=np.int64)
        out = np.empty((x.shape[0], len(self.cliques)), dtype=np.int64)
        for j, (c, st, o) in enumerate(zip(self.cliques, self._strides, self.offsets)):
            out[:, j] = o + x[:, list(c)] @ st
        return out

    # ---- Query protocol ---------------------------------------------------------------------
    def _coerce(self, records, check):
        T = len(self.levels)
        return _category_table(records, self._levels_arr, self.columns,
                               f"records: expected shape (n, {T}) (columns "
                               f"{', '.join(self.columns)})", check, one_d=True)

    def _t(self, x):
        n = x.shape[0]
        out = np.zeros((n, self.dim))
        out[np.arange(n)[:, None], self.cells(x)] = 1.0
        return out

    def statistic(self, records) -> np.ndarray:
        """The tables ``(d,)`` by counting (no ``(n, d)`` intermediate)."""
        x = self._coerce(records, True)
        return np.bincount(self.cells(x).ravel(), minlength=self.dim).astype(np.float64)

    def _sensitivity(self, norm, neighbours):
        return _one_hot_sensitivity(len(self.cliques), norm, neighbours)   # derivation above

    def _params(self):
        return {"levels": self.levels, "cliques": self.cliques, "columns": self.columns}

    def compiled_t(self):
        """Numba ``contrib(records f8[:, ::1], out f8[:, ::1])`` for the compiled DA-MCMC path."""
        return _compiled_contrib(tuple(self.offsets), tuple(tuple(int(s) for s in st)
                                                            for st in self._strides),
                                 self.cliques, self.dim)


_CONTRIB_CACHE: dict = {}


def _compiled_contrib(offsets, strides, cliques, dim):
    key = (offsets, strides, cliques, dim)
    if key in _CONTRIB_CACHE:
        return _CONTRIB_CACHE[key]
    import numba

    m = len(cliques)
    width = max(len(c) for c in cliques)
    var = np.full((m, width), -1, dtype=np.int64)
    strd = np.zeros((m, width), dtype=np.int64)
    for j, (c, st) in enumerate(zip(cliques, strides)):
        var[j, :len(c)] = c
        strd[j, :len(c)] = st
    off = np.asarray(offsets, dtype=np.int64)

    @numba.njit(cache=False)
    def contrib(records, out):
        for r in range(records.shape[0]):
            for c in range(dim):
                out[r, c] = 0.0
            for j in range(m):
                cell = off[j]
                for a in range(width):
                    v = var[j, a]
                    if v < 0:
                        break
                    cell += int(records[r, v]) * strd[j, a]
                out[r, cell] = 1.0

    _CONTRIB_CACHE[key] = contrib
    return contrib


def project_simplex(v) -> np.ndarray:
    """Euclidean projection of each row of ``v`` onto the probability simplex.

    ``argmin_w ||w - v||_2`` subject to ``w >= 0, sum(w) = 1`` (Duchi et al. 2008, Fig. 1; the
    extract's §1.3 step 2): sort ``u`` decreasingly, ``rho = max{j : u_j - (sum_{r<=j} u_r - 1)/j
    > 0}``, ``tau = (sum_{r<=rho} u_r - 1)/rho``, ``w = max(v - tau, 0)``.

    Parameters
    ----------
    v : array (..., k)

    Returns
    -------
    array (..., k), rows on the simplex.
    """
    v = np.asarray(v, dtype=np.float64)
    if v.shape[-1] == 0 or not np.all(np.isfinite(v)):
        raise ValueError("project_simplex needs finite vectors of length >= 1")
    u = -np.sort(-v, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    j = np.arange(1, v.shape[-1] + 1)
    cond = u - css / j > 0
    rho = v.shape[-1] - np.argmax(cond[..., ::-1], axis=-1)    # last True (1-based)
    tau = np.take_along_axis(css, (rho - 1)[..., None], axis=-1) / rho[..., None]
    return np.maximum(v - tau, 0.0)
