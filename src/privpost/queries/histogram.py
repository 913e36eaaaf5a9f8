"""Histogram: one-hot counts of a categorical field."""

from __future__ import annotations

import numpy as np

from privpost.errors import DataError, ReleaseError
from privpost.queries.base import (Query, _field, _pos_int, _columns, _dim,
                                    _one_hot_sensitivity, _integer_records)

# --------------------------------------------------------------------------------------------
# 3. Histogram
# --------------------------------------------------------------------------------------------

class Histogram(Query):
    """Counts of categorical records ``0..k-1``: ``t(x) = e_x`` (one-hot), ``d = k``.

    Records: integers ``0..k-1``, shape ``(n,)`` or ``(n, 1)`` (``int64``, or floats with
    integral values). Other values are rejected by :meth:`validate_records` -- there is no
    meaningful clamp for a category.

    Sensitivity.

    * replace-one: ``t(r) - t(r') = e_r - e_r'`` has two non-zero entries ``+1, -1`` when
      ``r != r'`` (needs ``k >= 2``): L1 = 2, L2 = sqrt(2), tight.
    * add/remove: ``||e_r|| = 1`` in both norms: L1 = L2 = 1, tight.

    (Seed 003 pitfall 1: the thesis code uses 1 with replace-one neighbours; that is the
    add/remove value.)
    """

    name = "histogram"
    _init_fields = ("categories", "columns", "levels")
    _required_fields = ("categories",)

    def __init__(self, categories, *, columns=None, levels=None):
        self.categories = _dim(_pos_int(categories, "categories", minimum=2), "categories")
        self.columns = _columns(columns, ("x",))
        self.dim = self.categories
        # levels: optional public names of the categories 0..k-1 (e.g. string levels of a CSV
        # column), used in the labels; records stay integer codes.
        if levels is not None:
            if isinstance(levels, str) or not hasattr(levels, "__iter__"):
                raise ReleaseError(_field("levels"), f"must be a list of names, got {levels!r}")
            levels = tuple(levels)
            if len(levels) != self.categories or not all(isinstance(v, str) and v for v in levels) \
                    or len(set(levels)) != len(levels):
                raise ReleaseError(_field("levels"), f"must be {self.categories} distinct "
                                   f"non-empty names (one per category), got {list(levels)!r}")
        self.levels = levels
        names = levels if levels is not None else range(self.categories)
        self.labels = tuple(f"count[{self.columns[0]}={j}]" for j in names)
        self.integer = True

    def _coerce(self, records, check):
        def shape_ok(a):
            if a.ndim == 1:
                return a
            if a.ndim == 2 and a.shape[1] == 1:
                return a[:, 0]
            return None
        x = _integer_records(records, shape_ok,
                             "records: expected shape (n,) or (n, 1) of categories", check)
        if check and x.size:
            bad = (x < 0) | (x >= self.categories)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"records: category {int(x[row])} at row {row} is outside "
                                f"0..{self.categories - 1}")
        return x

    def _t(self, x):
        out = np.zeros((x.shape[0], self.categories))
        out[np.arange(x.shape[0]), x] = 1.0
        return out

    def _sensitivity(self, norm, neighbours):
        return _one_hot_sensitivity(1, norm, neighbours)

    def _params(self):
        out = {"categories": self.categories, "columns": self.columns}
        if self.levels is not None:
            out["levels"] = self.levels
        return out
