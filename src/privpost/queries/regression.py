"""Linear-regression sufficient statistics (RegressionStats) and the covariate moments
(CovariateMoments) released from the same records with the same normalisation."""

from __future__ import annotations

import itertools
import math

import numpy as np

from privpost.errors import ReleaseError
from privpost.queries.base import (Query, _field, _finite_float, _bounds, _columns,
                                    _dim, _table_records)

# --------------------------------------------------------------------------------------------
# 5. Linear-regression sufficient statistics
# --------------------------------------------------------------------------------------------

def _to_unit_box(z, lo, hi):
    """Each column of ``z (n, k)`` clamped to ``[lo_j, hi_j]`` and mapped affinely onto
    ``[-1, 1]`` (``lo``, ``hi`` shape ``(k,)``)."""
    return 2.0 * (np.clip(z, lo, hi) - lo) / (hi - lo) - 1.0


class RegressionStats(Query):
    """Clamped, normalised linear-regression sufficient statistics (seed 000 §5, Def. 5.1).

    Records: ``(n, p+1)`` reals on the original scale, columns ``x_1..x_p, y``.

    Normalisation (part of the mechanism, never of the model): each field is clamped to its
    bounds and mapped to ``[-1, 1]``: ``z~ = 2 (clamp(z, a, b) - a) / (b - a) - 1``.
    With ``x~ = (1, x~_1, ..., x~_p)`` (intercept first) the per-record contribution is

    ``t = ( x~ y~  [p+1 entries],  y~^2  [1],  upper triangle of x~ x~^T in row-major order
    without the constant (0, 0) entry  [(p+1)(p+2)/2 - 1] )``

    so ``d = (p+1)(p+2)/2 + (p+1)`` (9 at ``p = 2``), matching seed 000's
    ``s = (x~^T y~, y~^T y~, x~^T x~)`` on unique entries. Labels: ``XtY[j]``, ``YtY``,
    ``XtX[j,k]`` (``j <= k``, index 0 is the intercept). :meth:`unpack` rebuilds the symmetric
    matrices from a (noisy) released vector.

    Sensitivity (all per-entry ranges are over ``x~_j, y~ in [-1, 1]``):

    * replace-one, L1, default ``p^2 + 4p + 3`` (15 at p = 2) -- a provably valid bound from the
      width of each entry's range (``|t_e(r) - t_e(r')| <= sup t_e - inf t_e``):

      - ``x~_j y~`` for the p+1 entries ``j = 0..p`` (``x~_0 = 1``): range ``[-1, 1]``, width 2
        -> ``2(p+1)``;
      - ``y~^2``: range ``[0, 1]``, width 1 -> ``1``;
      - intercept row ``x~_0 x~_j = x~_j`` (``j = 1..p``): width 2 -> ``2p``;
      - squares ``x~_j^2``: ``[0, 1]``, width 1 -> ``p``;
      - cross products ``x~_j x~_k`` (``1 <= j < k``): width 2, ``p(p-1)/2`` of them -> ``p(p-1)``;

      total ``2(p+1) + 1 + 2p + p + p(p-1) = p^2 + 4p + 3``. The entries cannot all reach their
      extremes together, so this is loose: seed 000 states ``p^2 + 3p + 3`` (13 at p = 2), which
      the extract checked numerically; the tight value at p = 2 is about 9.375. A smaller value
      the user has *proved* can be passed as ``sensitivity=``; it then replaces the default for
      ``norm="l1", neighbours="replace"`` only, and is recorded in :meth:`to_dict`. **The user
      is responsible for its validity**; the constructor only rejects values that are not
      finite and > 0, or (for ``p <= 5``) smaller than the L1 change between two corner
      records of ``[-1, 1]^{p+1}``, which proves them wrong.
    * replace-one, L2: ``sqrt(sum of squared widths) = sqrt(4(p+1) + 1 + 4p + p + 2p(p-1))
      = sqrt(2p^2 + 7p + 5)`` (``sqrt(27)`` at p = 2), valid because every coordinate of the
      difference is bounded by its width.
    * add/remove: every entry has ``|t_e| <= 1`` and the record ``x~ = 1, y~ = 1`` makes all
      entries 1: L1 = d and L2 = sqrt(d), tight.
    """

    name = "regression_stats"
    _init_fields = ("bounds_x", "bounds_y", "sensitivity", "columns")
    _required_fields = ("bounds_x", "bounds_y")

    def __init__(self, bounds_x, bounds_y, sensitivity=None, *, columns=None):
        if isinstance(bounds_x, (str, bytes)) or not hasattr(bounds_x, "__iter__"):
            raise ReleaseError(_field("bounds_x"),
                               f"must be a list of (lower, upper) pairs, one per predictor, got {bounds_x!r}")
        bx = tuple(_bounds(b, "bounds_x") for b in bounds_x)
        if not bx:
            raise ReleaseError(_field("bounds_x"), "needs at least one predictor")
        self.bounds_x = bx
        self.bounds_y = _bounds(bounds_y, "bounds_y")
        p = len(bx)
        _dim((p + 1) * (p + 2) // 2 + (p + 1), "bounds_x")
        self.p = p
        self.columns = _columns(columns, tuple(f"x{j + 1}" for j in range(p)) + ("y",))
        self._lo = np.array([b[0] for b in bx] + [self.bounds_y[0]])
        self._hi = np.array([b[1] for b in bx] + [self.bounds_y[1]])
        iu0, iu1 = np.triu_indices(p + 1)
        keep = ~((iu0 == 0) & (iu1 == 0))
        self._iu = (iu0[keep], iu1[keep])
        self.dim = (p + 1) * (p + 2) // 2 + (p + 1)
        self.labels = (tuple(f"XtY[{j}]" for j in range(p + 1)) + ("YtY",)
                       + tuple(f"XtX[{j},{k}]" for j, k in zip(*self._iu)))
        self.integer = False
        self.default_sensitivity_l1 = float(p * p + 4 * p + 3)
        if sensitivity is not None:
            sensitivity = _finite_float(sensitivity, "sensitivity")
            if not sensitivity > 0:
                raise ReleaseError(_field("sensitivity"), f"must be > 0, got {sensitivity}")
            lower = self._corner_lower_bound()
            if lower is not None and sensitivity < lower - 1e-12:
                raise ReleaseError(
                    _field("sensitivity"),
                    f"{sensitivity} is invalid: two records at corners of the normalised box "
                    f"already differ by {lower:g} in L1 (the default valid bound is "
                    f"{self.default_sensitivity_l1:g})")
        self.user_sensitivity = sensitivity

    # ---- normalisation and contributions -------------------------------------------------
    def normalise(self, records, *, check: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Clamp and map records to ``[-1, 1]``.

        Returns ``(x_tilde, y_tilde)``: ``x_tilde`` of shape ``(n, p+1)`` with the intercept
        column of ones first, ``y_tilde`` of shape ``(n,)``.
        """
        z = self._coerce(records, check)
        zt = self._normalise(z)
        n = zt.shape[0]
        return np.concatenate([np.ones((n, 1)), zt[:, :-1]], axis=1), zt[:, -1]

    def _normalise(self, z):
        return _to_unit_box(z, self._lo, self._hi)

    def _coerce(self, records, check):
        return _table_records(records, self.p + 1, check,
                              f"{self.p} predictor(s) then the response")

    def _t(self, z):
        zt = self._normalise(z)
        n = zt.shape[0]
        xt = np.empty((n, self.p + 1))
        xt[:, 0] = 1.0
        xt[:, 1:] = zt[:, :-1]
        yt = zt[:, -1]
        return np.concatenate([xt * yt[:, None], (yt * yt)[:, None],
                               xt[:, self._iu[0]] * xt[:, self._iu[1]]], axis=1)

    # ---- released vector <-> matrices ----------------------------------------------------
    def unpack(self, stat, n) -> tuple[np.ndarray, np.ndarray | float, np.ndarray]:
        """Rebuild ``(x~^T y~, y~^T y~, x~^T x~)`` from a (noisy) released vector.

        ``stat``: shape ``(..., d)``. ``n``: the public record count, written into the constant
        ``x~^T x~[0, 0]`` entry (it is never released). Returns ``xty`` of shape ``(..., p+1)``,
        ``yty`` of shape ``(...)`` (a float for a single vector), and the symmetric ``xtx`` of
        shape ``(..., p+1, p+1)``; off-diagonal entries mirror the single released value.
        """
        stat = np.asarray(stat, dtype=np.float64)
        if stat.shape[-1:] != (self.dim,):
            raise ValueError(f"stat must have last dimension {self.dim}, got shape {stat.shape}")
        n = float(n)
        p1 = self.p + 1
        lead = stat.shape[:-1]
        xty = stat[..., :p1].copy()
        yty = stat[..., p1].copy()
        xtx = np.empty(lead + (p1, p1))
        tri = stat[..., p1 + 1:]
        xtx[..., self._iu[0], self._iu[1]] = tri
        xtx[..., self._iu[1], self._iu[0]] = tri
        xtx[..., 0, 0] = n
        if not lead:
            yty = float(yty)
        return xty, yty, xtx

    def pack(self, xty, yty, xtx) -> np.ndarray:
        """Inverse of :meth:`unpack` (drops ``xtx[..., 0, 0]`` and the lower triangle)."""
        xty = np.asarray(xty, dtype=np.float64)
        xtx = np.asarray(xtx, dtype=np.float64)
        yty = np.asarray(yty, dtype=np.float64)
        return np.concatenate([xty, yty[..., None], xtx[..., self._iu[0], self._iu[1]]], axis=-1)

    # ---- sensitivity ---------------------------------------------------------------------
    def _widths(self) -> np.ndarray:
        p = self.p
        return np.array([2.0] * (p + 1) + [1.0]
                        + [2.0 if j == 0 or j != k else 1.0 for j, k in zip(*self._iu)])

    def _corner_lower_bound(self) -> float | None:
        if self.p > 5:
            return None
        corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * (self.p + 1), indexing="ij"))
        corners = corners.reshape(self.p + 1, -1).T
        lo, hi = self._lo, self._hi
        t = self._t(lo + (corners + 1.0) * (hi - lo) / 2.0)
        return float(np.abs(t[:, None, :] - t[None, :, :]).sum(-1).max())

    def _sensitivity(self, norm, neighbours):
        if neighbours == "add-remove":
            return float(self.dim) if norm == "l1" else math.sqrt(self.dim)
        if norm == "l1":
            return self.user_sensitivity if self.user_sensitivity is not None \
                else self.default_sensitivity_l1
        return math.sqrt(float(np.sum(self._widths() ** 2)))

    def _params(self):
        return {"bounds_x": self.bounds_x, "bounds_y": self.bounds_y,
                "sensitivity": self.user_sensitivity, "columns": self.columns}


# --------------------------------------------------------------------------------------------
# 5b. Covariate moments (Gibbs-SS-Noisy)
# --------------------------------------------------------------------------------------------

class CovariateMoments(Query):
    """Sample moments up to order 4 of the clamped, normalised covariates (seed 003 §5.2.4.4).

    The release Bernstein & Sheldon's Gibbs-SS-Noisy spends part of its budget on: the CLT of the
    regression statistic needs ``E[(1, x~)^{⊗4}]``, whose unique entries other than the
    constant 1 are the moments ``E[x~^a] = E[prod_j x~_j^{a_j}]`` with ``1 <= |a| <= 4``.

    Records: ``(n, p+1)`` reals on the original scale, columns ``x_1..x_p, y`` -- **the
    RegressionStats layout**, so a curator releases both statistics from one table. The response
    column is ignored by ``t`` (only validated like RegressionStats's: shape and NaN, so the two
    queries accept exactly the same tables).

    Normalisation: identical to :class:`RegressionStats` with the same ``bounds_x``:
    ``x~_j = 2 (clamp(x_j, a_j, b_j) - a_j) / (b_j - a_j) - 1``, so the moments are those of the
    very ``x~`` the regression statistics are built from. Per record,

    ``t = ( x~^a  for every exponent vector a in N^p with 1 <= |a| <= 4 )``

    ordered by degree, then by the multiset of covariate indices in
    ``itertools.combinations_with_replacement`` order (p = 1: ``x~, x~^2, x~^3, x~^4``; p = 2:
    ``x~1, x~2, x~1^2, x~1 x~2, x~2^2, x~1^3, ...``); ``exponents`` (shape ``(d, p)``) lists
    them. ``d = C(p+4, 4) - 1`` (4, 14, 34 at p = 1, 2, 3). The constant entry sums to the
    public ``n`` and is not released. The degree <= 2 entries repeat information carried by
    RegressionStats's ``x~^T x~`` block; the thesis releases them anyway, and so does this query.
    Labels: ``sum(x1^2*x2)`` etc. with the column names (values on the normalised scale).

    Sensitivity. On ``[-1, 1]^p`` a monomial with some odd exponent ranges over ``[-1, 1]``
    (width 2: set an odd-exponent coordinate to ``±1``, the others to 1); one with all exponents
    even ranges over ``[0, 1]`` (width 1). There are ``d_even = C(p+2, 2) - 1`` even monomials
    (``a = 2b`` with ``1 <= |b| <= 2``) and ``d_odd = d - d_even`` odd ones.

    * replace-one, L1: ``|t_e(r) - t_e(r')| <= width_e``, so ``2 d_odd + d_even`` (6, 23, 59 at
      p = 1, 2, 3). Valid, not tight: the entries cannot all reach their extremes together (at
      p = 1 the exact value is about 4.33, at ``x~ = -1`` vs ``x~ ≈ 0.6``).
    * replace-one, L2: ``sqrt(4 d_odd + d_even)`` (``sqrt(10)`` at p = 1), by the same
      coordinate-wise bound.
    * add/remove: ``|t_e(r)| <= 1`` for every entry and the record ``x~ = (1, ..., 1)`` makes
      all entries 1: L1 = ``d``, L2 = ``sqrt(d)``, tight.

    (The thesis states ``w_x^4`` per entry, ``D w_x^4`` in total with ``D = 5`` unique entries at
    p = 1, counting the public constant; for data scaled to ``[0, 1]`` that is 5. Its per-entry
    ``w_x^4`` is ``16`` on the ``[-1, 1]`` scale used here, far above the true ranges above.)
    """

    name = "covariate_moments"
    _init_fields = ("bounds_x", "columns")
    _required_fields = ("bounds_x",)
    order = 4

    def __init__(self, bounds_x, *, columns=None):
        if isinstance(bounds_x, (str, bytes)) or not hasattr(bounds_x, "__iter__"):
            raise ReleaseError(_field("bounds_x"),
                               f"must be a list of (lower, upper) pairs, one per predictor, got {bounds_x!r}")
        bx = tuple(_bounds(b, "bounds_x") for b in bounds_x)
        if not bx:
            raise ReleaseError(_field("bounds_x"), "needs at least one predictor")
        self.bounds_x = bx
        p = len(bx)
        _dim(math.comb(p + self.order, self.order) - 1, "bounds_x")
        self.p = p
        self.columns = _columns(columns, tuple(f"x{j + 1}" for j in range(p)) + ("y",))
        self._lo = np.array([b[0] for b in bx])
        self._hi = np.array([b[1] for b in bx])
        expo = []
        for deg in range(1, self.order + 1):
            for combo in itertools.combinations_with_replacement(range(p), deg):
                a = np.zeros(p, dtype=np.int64)
                for j in combo:
                    a[j] += 1
                expo.append(a)
        self.exponents = np.array(expo, dtype=np.int64)
        self.exponents.setflags(write=False)
        self.dim = int(self.exponents.shape[0])
        self.labels = tuple("sum(" + "*".join(
            self.columns[j] + (f"^{k}" if k > 1 else "") for j, k in enumerate(a) if k) + ")"
            for a in self.exponents)
        self.integer = False
        self._odd = np.any(self.exponents % 2 == 1, axis=1)

    def normalise(self, records, *, check: bool = True) -> np.ndarray:
        """Clamped covariates mapped to ``[-1, 1]``, shape ``(n, p)`` (no intercept column)."""
        return self._normalise(self._coerce(records, check))

    def _normalise(self, z):
        return _to_unit_box(z[:, :self.p], self._lo, self._hi)

    def _coerce(self, records, check):
        return _table_records(records, self.p + 1, check,
                              f"{self.p} predictor(s) then the response (ignored)")

    def _t(self, z):
        xt = self._normalise(z)
        out = np.ones((xt.shape[0], self.dim))
        for j in range(self.p):
            powers = xt[:, j:j + 1] ** np.arange(self.order + 1)        # (n, order + 1)
            out *= powers[:, self.exponents[:, j]]
        return out

    def _sensitivity(self, norm, neighbours):
        if neighbours == "add-remove":
            return float(self.dim) if norm == "l1" else math.sqrt(self.dim)
        width = np.where(self._odd, 2.0, 1.0)
        return float(width.sum()) if norm == "l1" else math.sqrt(float(np.sum(width ** 2)))

    def _params(self):
        return {"bounds_x": self.bounds_x, "columns": self.columns}
