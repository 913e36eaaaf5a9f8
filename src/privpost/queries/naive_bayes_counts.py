"""NaiveBayesCounts: the class-by-feature contingency tables of naive Bayes."""

from __future__ import annotations

import numpy as np

from privpost.queries.base import (Query, _feature_levels, _pos_int, _columns, _dim,
                                    _one_hot_sensitivity, _category_table)

# --------------------------------------------------------------------------------------------
# 4. Naive-Bayes contingency tables
# --------------------------------------------------------------------------------------------

class NaiveBayesCounts(Query):
    """Class-by-feature contingency tables of the naive-Bayes log-linear model (seed 000 §3.1).

    Records: ``(n, K+1)`` integers; column 0 is the class ``y`` in ``0..I-1``, column ``k``
    (``k = 1..K``) is feature ``x_k`` in ``0..J_k - 1``.

    Released: for every feature ``k`` the ``I x J_k`` table ``n^k_{ij} = #(y = i, x_k = j)``,
    flattened in ``(k, i, j)`` row-major order (feature outermost, level innermost), so
    ``d = I * sum_k J_k``. The class counts are not released separately (they are implied:
    ``sum_j n^k_{ij} = n_i`` for every ``k``). Each record contributes exactly one count to each
    of the K tables.

    Sensitivity.

    * replace-one: in each table the record's count moves from cell ``(y, x_k)`` to
      ``(y', x'_k)`` -- a change of ``+1`` and ``-1`` in two cells, or nothing if the cells
      coincide. Over K tables: L1 <= 2K and L2 <= sqrt(2K); both attained by changing the class
      (``y != y'``, which moves the count in every table). This is seed 000's ``2K``.
    * add/remove: one count in each of the K tables: L1 = K, L2 = sqrt(K), tight.
    """

    name = "naive_bayes_counts"
    _init_fields = ("n_classes", "n_levels", "columns")
    _required_fields = ("n_classes", "n_levels")

    def __init__(self, n_classes, n_levels, *, columns=None):
        self.n_classes = _pos_int(n_classes, "n_classes", minimum=2)
        levels = _feature_levels(n_levels)
        _dim(self.n_classes * sum(levels), "n_levels")
        self.n_levels = levels
        K = len(levels)
        self.n_features = K
        self.columns = _columns(columns, ("y",) + tuple(f"x{k + 1}" for k in range(K)))
        I = self.n_classes
        # offset of table k in the flattened vector
        self._offsets = np.concatenate([[0], np.cumsum([I * J for J in levels])[:-1]]).astype(np.int64)
        self._levels_arr = np.asarray(levels, dtype=np.int64)
        self.dim = I * sum(levels)
        ycol = self.columns[0]
        self.labels = tuple(
            f"n[{ycol}={i},{self.columns[k + 1]}={j}]"
            for k, J in enumerate(levels) for i in range(I) for j in range(J)
        )
        self.integer = True

    def table_slices(self) -> list[slice]:
        """Slice of the released vector holding table ``k`` (reshape to ``(I, J_k)``)."""
        I = self.n_classes
        return [slice(int(o), int(o) + I * J) for o, J in zip(self._offsets, self.n_levels)]

    def _coerce(self, records, check):
        k = self.n_features + 1
        return _category_table(records, np.concatenate([[self.n_classes], self._levels_arr]),
                               self.columns, f"records: expected shape (n, {k}) (class, then "
                               f"{k - 1} features)", check)

    def _t(self, x):
        n = x.shape[0]
        out = np.zeros((n, self.dim))
        # cell index of record r in table k: offset_k + y * J_k + x_k
        cells = self._offsets + x[:, :1] * self._levels_arr + x[:, 1:]
        out[np.arange(n)[:, None], cells] = 1.0
        return out

    def _sensitivity(self, norm, neighbours):
        return _one_hot_sensitivity(self.n_features, norm, neighbours)

    def _params(self):
        return {"n_classes": self.n_classes, "n_levels": self.n_levels, "columns": self.columns}
