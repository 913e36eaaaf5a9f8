"""CensoredLogMean: censored mean of logs of compositional records (seed 002)."""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import DataError, ReleaseError
from privpost.queries.base import (Query, _field, _finite_float, _pos_int, _columns,
                                    _dim, _table_records)

# --------------------------------------------------------------------------------------------
# 7. Censored mean of logs (compositional data)
# --------------------------------------------------------------------------------------------

class CensoredLogMean(Query):
    """Left-censored mean of logs of compositional records (seed 002 §3.1, extract §2.1).

    Records: ``(n, D)`` rows on the simplex (non-negative, summing to 1 within 1e-6; otherwise
    :class:`DataError`). ``t(x)_j = log(min(max(x_j, a), 1)) / N`` with the censoring threshold
    ``0 < a < 1`` and the public record count ``N``; the censored values are not renormalised.
    ``d = D``. (Parts are also capped at 1: the simplex check's 1e-6 tolerance, or
    ``check=False``, would otherwise let ``log x_j`` exceed 0 and the bound below fail.)

    Sensitivity. Each ``log min(max(x_j, a), 1)`` lies in ``[log a, 0]``, so each coordinate of
    ``t`` lies in ``[log(a)/N, 0]``, width ``|log a| / N``.

    * replace-one: L1 <= ``-D log(a) / N``, L2 <= ``-sqrt(D) log(a) / N``.
    * add/remove (public denominator ``N``, as for :class:`Mean`): ``|t_j(r)| <= |log a| / N``,
      so the same values.

    The paper's text states ``GS <= -2 d log(a) / n``; the factor 2 is an overstatement (the
    per-coordinate range above already covers replacing a record), and the mechanism the paper
    actually runs uses scale ``-d log(a) / (n eps)``, i.e. sensitivity ``-d log(a) / n`` -- the
    value used here (extract §2.1 and §6). These are coordinate-wise bounds: on the simplex the
    coordinates cannot all be censored at once (when ``D a < 1``) nor all equal to 1, so the
    bound is not attained there (the paper does not use the tighter bound either); it is
    attained by the coordinate-wise relaxation to ``[0, 1]^D``.
    """

    name = "censored_log_mean"
    _init_fields = ("parts", "threshold", "n", "columns")
    _required_fields = ("parts", "threshold", "n")

    def __init__(self, parts, threshold, n, *, columns=None):
        self.parts = _dim(_pos_int(parts, "parts", minimum=2), "parts")
        a = _finite_float(threshold, "threshold")
        if not 0.0 < a < 1.0:
            raise ReleaseError(_field("threshold"), f"must lie in (0, 1), got {a}")
        self.threshold = a
        self.n = _pos_int(n, "n")
        self.columns = _columns(columns, tuple(f"x{j + 1}" for j in range(self.parts)))
        self.dim = self.parts
        self.labels = tuple(f"mean(log max({c}, {a:g}))" for c in self.columns)
        self.integer = False

    def _coerce(self, records, check):
        x = _table_records(records, self.parts, check, "one composition per row")
        if check and x.size:
            neg = x < 0
            if neg.any():
                row, col = (int(v) for v in np.argwhere(neg)[0])
                raise DataError(f"records: negative part {x[row, col]!r} at row {row}, column "
                                f"{col} (compositions must lie on the simplex)")
            if not np.isfinite(x).all():
                row, col = (int(v) for v in np.argwhere(~np.isfinite(x))[0])
                raise DataError(f"records: non-finite part at row {row}, column {col}")
            s = x.sum(axis=1)
            bad = np.abs(s - 1.0) > 1e-6
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"records: row {row} sums to {s[row]!r}, not 1 (within 1e-6); "
                                f"compositions must lie on the simplex")
        return x

    def _t(self, x):
        return np.log(np.clip(x, self.threshold, 1.0)) / self.n

    def _sensitivity(self, norm, neighbours):
        width = -math.log(self.threshold) / self.n
        return self.parts * width if norm == "l1" else math.sqrt(self.parts) * width

    def _params(self):
        return {"parts": self.parts, "threshold": self.threshold, "n": self.n,
                "columns": self.columns}

    def compiled_t(self):
        """Numba ``contrib(records f8[:, ::1], out f8[:, ::1])`` for the compiled DA-MCMC path."""
        from privpost.models._compiled_dirichlet_move import censored_log_mean_contrib
        return censored_log_mean_contrib(self.parts, self.threshold, self.n)
