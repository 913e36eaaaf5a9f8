"""The DPss threshold score of seed 002 (Guo, Barrientos & Pena, Sec. 3.1.2; extract §2.3).

:class:`ThresholdScore` is the histogram of the per-record **minimum part** over the bins of a
decreasing grid of censoring thresholds ``a_1 > a_2 > ... > a_M``::

    s_1 = #{i : min_j x_ij >= a_1}
    s_m = #{i : a_m <= min_j x_ij < a_{m-1}},   m = 2..M

so that ``u_m = s_1 + ... + s_m`` is the number of records with no part censored at ``a_m``
(the paper's "uncensored individuals"). Records whose minimum part is below ``a_M`` fall in no
bin (their contribution row is all zeros). It is registered in
:data:`privpost.queries.QUERIES` under ``"threshold_score"``.
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import DataError, ReleaseError
from privpost.queries.base import Query, _columns, _field, _finite_float, _pos_int, _table_records

__all__ = ["ThresholdScore"]


class ThresholdScore(Query):
    """Counts of records by the bin of their smallest part (seed 002's ``Score(D)``).

    Parameters
    ----------
    parts : int >= 2
        ``D``, the number of parts of a composition.
    thresholds : sequence of M >= 1 floats, strictly decreasing, each in (0, 1)
        The candidate censoring thresholds ``a_1 > ... > a_M``.
    columns : optional names of the ``D`` record columns.

    Records: ``(n, D)`` compositions (same checks as :class:`CensoredLogMean`: non-negative,
    finite, rows summing to 1 within 1e-6). ``t(x)`` is ``(n, M)``: a one-hot row for the bin of
    ``min_j x_j`` (or zeros when ``min_j x_j < a_M``). Integer-valued (``integer = True``).

    Sensitivity. Every row of ``t`` is a unit vector or zero.

    * replace-one: replacing record ``x`` by ``x'`` changes at most two bins by one each
      (remove ``x``'s bin, add ``x'``'s), so L1 <= 2 and L2 <= sqrt(2); both are attained
      (move a record between two bins). Hence the seed's geometric parameter
      ``exp(-eps_2 / 2)`` (extract §2.3 and pitfall 5).
    * add/remove: one row, L1 = L2 = 1.
    """

    name = "threshold_score"
    _init_fields = ("parts", "thresholds", "columns")
    _required_fields = ("parts", "thresholds")

    def __init__(self, parts, thresholds, *, columns=None):
        self.parts = _pos_int(parts, "parts", minimum=2)
        from privpost.limits import check_count

        # a record has one column per part: bounded before the column names are built
        # (parts = 3e300 in a document was an unbounded loop, found by fuzzing)
        check_count(_field("parts"), self.parts, "max_columns", "parts (columns; max_columns)")
        if isinstance(thresholds, (str, bytes)):
            raise ReleaseError(_field("thresholds"), "must be a list of numbers")
        try:
            ths = [_finite_float(a, "thresholds") for a in thresholds]
        except TypeError:
            raise ReleaseError(_field("thresholds"),
                               f"must be a list of numbers, got {thresholds!r}") from None
        if not ths:
            raise ReleaseError(_field("thresholds"), "needs at least one threshold")
        if not all(0.0 < a < 1.0 for a in ths):
            raise ReleaseError(_field("thresholds"), f"each must lie in (0, 1), got {ths}")
        if any(b >= a for a, b in zip(ths, ths[1:])):
            raise ReleaseError(_field("thresholds"),
                               f"must be strictly decreasing (a_1 > a_2 > ...), got {ths}")
        self.thresholds = tuple(ths)
        self.columns = _columns(columns, tuple(f"x{j + 1}" for j in range(self.parts)))
        self.dim = len(ths)
        labels = [f"#min>={ths[0]:g}"]
        labels += [f"#{b:g}<=min<{a:g}" for a, b in zip(ths, ths[1:])]
        self.labels = tuple(labels)
        self.integer = True

    def _coerce(self, records, check):
        x = _table_records(records, self.parts, check, "one composition per row")
        if check and x.size:
            if not np.isfinite(x).all():
                row, col = (int(v) for v in np.argwhere(~np.isfinite(x))[0])
                raise DataError(f"records: non-finite part at row {row}, column {col}")
            if (x < 0).any():
                row, col = (int(v) for v in np.argwhere(x < 0)[0])
                raise DataError(f"records: negative part at row {row}, column {col} "
                                "(compositions must lie on the simplex)")
            bad = np.abs(x.sum(axis=1) - 1.0) > 1e-6
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"records: row {row} does not sum to 1 (within 1e-6); "
                                "compositions must lie on the simplex")
        return x

    def bins(self, x: np.ndarray) -> np.ndarray:
        """Bin index ``m - 1`` in ``0..M-1`` of each record's minimum part, ``-1`` below ``a_M``.

        ``x``: ``(n, D)`` -> ``(n,)`` int64.
        """
        mins = np.asarray(x, dtype=np.float64).min(axis=1)
        # number of thresholds strictly above the minimum = index of the first a_m <= min
        desc = np.asarray(self.thresholds)
        idx = np.searchsorted(-desc, -mins, side="left")   # first m with a_m <= min
        return np.where(idx < desc.size, idx, -1).astype(np.int64)

    def _t(self, x):
        out = np.zeros((x.shape[0], self.dim))
        b = self.bins(x)
        ok = b >= 0
        out[np.flatnonzero(ok), b[ok]] = 1.0
        return out

    def _sensitivity(self, norm, neighbours):
        if neighbours == "replace":
            return 2.0 if norm == "l1" else math.sqrt(2.0)
        return 1.0

    def _params(self):
        return {"parts": self.parts, "thresholds": list(self.thresholds), "columns": self.columns}
