"""TruncatedSum: a sufficient statistic summed over the records inside ``[v, w]``."""

from __future__ import annotations

import numpy as np

from privpost.errors import ReleaseError
from privpost.queries.base import Query, _field, _bounds, _columns, _scalar_records

# --------------------------------------------------------------------------------------------
# 6. Truncated sum (unbounded exponential families)
# --------------------------------------------------------------------------------------------

_TRANSFORMS = {
    "identity": np.asarray,
    "log": np.log,
}


class TruncatedSum(Query):
    """Sum of a sufficient statistic over records inside ``[v, w]`` (seed 003 §4.3).

    For unbounded exponential families (exponential, Poisson, ...): records outside the interval
    are **dropped** (contribute 0, not clamped): ``t(x) = T(x) 1{v <= x <= w}``, ``d = 1``, with
    ``T`` = ``"identity"`` (``T(x) = x``: exponential, Poisson) or ``"log"`` (``T(x) = log x``,
    needs ``v > 0``). Records: shape ``(n,)`` or ``(n, 1)``; any real or infinite value (NaN is
    rejected).

    Decisions, following the thesis (extract §2.4):

    * only the truncated sum ``s^ = sum_i 1{x_i in [v, w]} T(x_i)`` is released; the number of
      records inside the interval is **not** released (the thesis's random-sum CLT treats it as
      latent ``Binomial(n, q)``, ``q = F(w) - F(v)``);
    * the interval is **closed**, ``v <= x <= w`` (the thesis's ``1_{[a,b]}``). The authors'
      code tests strict inequalities; the two differ only for records exactly on a bound, which
      matters for discrete data (Poisson): with integer bounds, the inside probability is
      ``F(w) - F(v - 1)``. The sensitivity is the same either way.

    Sensitivity. Let ``R = T([v, w])`` (an interval, ``T`` monotone); each contribution lies in
    ``{0} ∪ R``.

    * replace-one: an inside record can be swapped for an outside one (contribution 0) as well
      as for another inside one, so ``|t(r) - t(r')| <= max(sup_R |T|, sup R - inf R)``, the
      diameter of ``{0} ∪ R``, attained. L1 = L2 (d = 1). For the exponential with
      ``0 <= v`` this is ``w``, **not** ``w - v`` (seed 003 pitfall 6; the authors' code uses
      ``w - v``, which is not a valid DP bound under truncation).
    * add/remove: ``|t(r)| <= sup_R |T| = max(|T(v)|, |T(w)|)``, attained.
    """

    name = "truncated_sum"
    _init_fields = ("bounds", "statistic", "columns")
    _required_fields = ("bounds",)

    def __init__(self, bounds, statistic="identity", *, columns=None):
        self.bounds = _bounds(bounds)
        if statistic not in _TRANSFORMS:
            raise ReleaseError(_field("statistic"),
                               f"must be one of {sorted(_TRANSFORMS)}, got {statistic!r}")
        if statistic == "log" and not self.bounds[0] > 0:
            raise ReleaseError(_field("bounds"),
                               f"statistic 'log' needs a lower bound > 0, got {self.bounds[0]}")
        # NB: stored as ``transform`` because ``statistic`` is the method computing s(x).
        self.transform = statistic
        self.columns = _columns(columns, ("x",))
        self.dim = 1
        col = self.columns[0]
        T = col if statistic == "identity" else f"{statistic}({col})"
        self.labels = (f"sum({T} for {self.bounds[0]:g}<={col}<={self.bounds[1]:g})",)
        self.integer = False

    def _coerce(self, records, check):
        return _scalar_records(records, check)

    def _t(self, x):
        v, w = self.bounds
        inside = (x >= v) & (x <= w)
        safe = np.where(inside, x, v)          # keeps log() away from outside values
        return np.where(inside, _TRANSFORMS[self.transform](safe), 0.0).reshape(-1, 1)

    def _range(self) -> tuple[float, float]:
        v, w = self.bounds
        tv, tw = (float(_TRANSFORMS[self.transform](np.float64(z))) for z in (v, w))
        return min(tv, tw), max(tv, tw)

    def _sensitivity(self, norm, neighbours):
        lo, hi = self._range()
        sup_abs = max(abs(lo), abs(hi))
        if neighbours == "replace":
            return max(sup_abs, hi - lo)
        return sup_abs

    def _params(self):
        return {"bounds": self.bounds, "statistic": self.transform, "columns": self.columns}
