"""Sum and Mean of one bounded scalar field (seed 000): clamped contributions."""

from __future__ import annotations

import numpy as np

from privpost.errors import DataError, ReleaseError
from privpost.queries.base import Query, _field, _bounds, _pos_int, _columns, _scalar_records

# --------------------------------------------------------------------------------------------
# 1. Sum
# --------------------------------------------------------------------------------------------

class Sum(Query):
    """Clamped sum of scalar records: ``s = sum_i clamp(x_i, a, b)``, ``d = 1``.

    Records: shape ``(n,)`` (or ``(n, 1)``), any real value; values outside ``[a, b]`` are
    clamped by ``t``.

    Sensitivity. Each contribution lies in ``[a, b]``.

    * replace-one: ``|t(r) - t(r')| <= b - a``, attained by ``r = a, r' = b``; in one dimension
      L1 = L2 = ``b - a``.
    * add/remove: ``|t(r)| <= max(|a|, |b|)``, attained at the bound of larger magnitude; L1 = L2.

    ``integer=True`` declares integer-valued records (counts, 0/1 answers) so that the discrete
    mechanisms apply: the bounds must then be integers, :meth:`validate_records` rejects
    non-integer records (:class:`DataError`), and ``t(x) = clamp(round(x), a, b)`` -- the
    rounding changes nothing for valid records and makes the statistic an integer for any
    model proposal. Contributions still lie in ``[a, b]``, so the sensitivities above hold
    unchanged.
    """

    name = "sum"
    _init_fields = ("bounds", "columns", "integer")
    _required_fields = ("bounds",)

    def __init__(self, bounds, *, columns=None, integer=False):
        self.bounds = _bounds(bounds)
        self.columns = _columns(columns, ("x",))
        self.dim = 1
        self.labels = (f"sum({self.columns[0]})",)
        if not isinstance(integer, bool):
            raise ReleaseError(_field("integer"), f"must be true or false, got {integer!r}")
        if integer and not all(float(b).is_integer() for b in self.bounds):
            raise ReleaseError(_field("bounds"), "an integer sum needs integer bounds, got "
                               f"{self.bounds}; type e.g. --bounds 0,1")
        self.integer = integer

    def _coerce(self, records, check):
        x = _scalar_records(records, check)
        if check and self.integer and x.size:
            bad = x != np.round(x)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"records: value {x[row]!r} at row {row} is not an integer "
                                "(an integer sum needs integer records)")
        return x

    def _t(self, x):
        lo, hi = self.bounds
        if self.integer:
            x = np.round(x)
        return np.clip(x, lo, hi).reshape(-1, 1)

    def _sensitivity(self, norm, neighbours):
        lo, hi = self.bounds
        if neighbours == "replace":
            return hi - lo
        return max(abs(lo), abs(hi))

    def _params(self):
        out = {"bounds": self.bounds, "columns": self.columns}
        if self.integer:                     # omitted when False: older documents stay equal
            out["integer"] = True
        return out


# --------------------------------------------------------------------------------------------
# 2. Mean
# --------------------------------------------------------------------------------------------

class Mean(Query):
    """Clamped mean with a public denominator: ``s = sum_i clamp(x_i, a, b) / N``, ``d = 1``.

    ``N = n`` is a **public constant** declared in the query (the curator's published record
    count); ``t(x) = clamp(x, a, b) / N``.

    Sensitivity. Each contribution lies in ``[a/N, b/N]``.

    * replace-one (the data size is ``N`` on both sides): ``(b - a) / N``; L1 = L2, tight.
    * add/remove: the released value is the clamped *sum* divided by the fixed public ``N``
      (not by the realised count, which differs by one between neighbours). Adding or removing a
      record changes it by ``|t(r)| <= max(|a|, |b|) / N``; L1 = L2, tight. This assumes ``N``
      is public and not itself data-dependent; releasing an exact mean whose denominator is the
      private count is *not* what this query does and is not covered by this bound.
    """

    name = "mean"
    _init_fields = ("bounds", "n", "columns")
    _required_fields = ("bounds", "n")

    def __init__(self, bounds, n, *, columns=None):
        self.bounds = _bounds(bounds)
        self.n = _pos_int(n, "n")
        self.columns = _columns(columns, ("x",))
        self.dim = 1
        self.labels = (f"mean({self.columns[0]})",)
        self.integer = False

    def _coerce(self, records, check):
        return _scalar_records(records, check)

    def _t(self, x):
        lo, hi = self.bounds
        return (np.clip(x, lo, hi) / self.n).reshape(-1, 1)

    def _sensitivity(self, norm, neighbours):
        lo, hi = self.bounds
        if neighbours == "replace":
            return (hi - lo) / self.n
        return max(abs(lo), abs(hi)) / self.n

    def _params(self):
        return {"bounds": self.bounds, "n": self.n, "columns": self.columns}
