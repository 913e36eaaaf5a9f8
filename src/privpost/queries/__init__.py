"""Queries: record-additive statistics, their per-record contributions and sensitivities.

A query turns confidential records into a released statistic ``s = sum_i t(x_i)`` (seed 000,
Assumption 2: record additivity). Each query knows

* how to check and coerce records (:meth:`Query.validate_records`);
* its per-record contributions ``t`` (vectorised, ``(n, ...) -> (n, d)`` float64), including the
  clamping / normalisation / truncation / censoring that is part of the *mechanism* (seed 000,
  pitfall 2: models never see clamped data, only ``t`` does);
* its global sensitivity in the L1 or L2 norm under replace-one ("replace", bounded DP, the
  default) or add/remove neighbours.

Every class docstring derives its sensitivities; ``tests/test_queries.py`` checks each one by
brute force on a small domain.

Records out of the declared bounds are **not** errors: ``t`` clamps them (``Sum``, ``Mean``,
``RegressionStats``), drops them (``TruncatedSum``) or censors them (``CensoredLogMean``) as
the query says. NaN, a wrong number of columns, an out-of-range category or a row off the simplex
raise :class:`privpost.errors.DataError`. Bad *public parameters* (reversed bounds, ``n < 1``,
non-finite values, ...) raise :class:`privpost.errors.ReleaseError` naming ``query.<field>``.

Example::

    >>> import numpy as np
    >>> from privpost.queries import Sum, query_from_dict
    >>> q = Sum(bounds=(0, 1))
    >>> q.statistic(np.array([0.2, 0.5, 7.0]))      # 7.0 is clamped to 1
    array([1.7])
    >>> q.sensitivity("l1", "replace"), q.sensitivity("l1", "add-remove")
    (1.0, 1.0)
    >>> query_from_dict(q.to_dict()) == q
    True
"""

from __future__ import annotations

import abc
import itertools
import math
import numbers
from typing import Any, ClassVar

import numpy as np

from privpost.errors import DataError, PrivpostError, ReleaseError

__all__ = [
    "Query",
    "Sum",
    "Mean",
    "Histogram",
    "NaiveBayesCounts",
    "RegressionStats",
    "CovariateMoments",
    "TruncatedSum",
    "CensoredLogMean",
    "QUERIES",
    "query_from_dict",
    "NORMS",
    "NEIGHBOURS",
]

NORMS = ("l1", "l2")
NEIGHBOURS = ("replace", "add-remove")


# --------------------------------------------------------------------------------------------
# parameter helpers (public parameters -> ReleaseError naming the field)
# --------------------------------------------------------------------------------------------

def _field(name: str) -> str:
    return f"query.{name}"


def _finite_float(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ReleaseError(_field(name), f"must be a finite real number, got {value!r}")
    try:
        value = float(value)
    except OverflowError:
        raise ReleaseError(_field(name), "must be finite, got an integer too large for a "
                           "float") from None
    if not math.isfinite(value):
        raise ReleaseError(_field(name), f"must be finite, got {value!r}")
    return value


def _bounds(value, name: str = "bounds") -> tuple[float, float]:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise ReleaseError(_field(name), f"must be a pair (lower, upper), got {value!r}") from None
    lo = _finite_float(lo, name)
    hi = _finite_float(hi, name)
    if not lo < hi:
        raise ReleaseError(_field(name), f"lower bound must be < upper bound, got ({lo}, {hi})")
    return lo, hi


def _pos_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool):
        raise ReleaseError(_field(name), f"must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, numbers.Integral):
        ivalue = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        ivalue = int(value)
    else:
        raise ReleaseError(_field(name), f"must be an integer >= {minimum}, got {value!r}")
    if ivalue < minimum:
        raise ReleaseError(_field(name), f"must be an integer >= {minimum}, got {ivalue}")
    return ivalue


def _columns(value, default: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return default
    if isinstance(value, str):
        value = (value,)
    try:
        cols = tuple(value)
    except TypeError:
        raise ReleaseError(_field("columns"), f"must be a list of names, got {value!r}") from None
    if len(cols) != len(default):
        raise ReleaseError(_field("columns"),
                           f"needs {len(default)} names, got {len(cols)}: {list(cols)!r}")
    if not all(isinstance(c, str) and c for c in cols):
        raise ReleaseError(_field("columns"), f"names must be non-empty strings, got {list(cols)!r}")
    if len(set(cols)) != len(cols):
        raise ReleaseError(_field("columns"), f"names must be distinct, got {list(cols)!r}")
    return cols


def _check_norm(norm: str, neighbours: str) -> None:
    if norm not in NORMS:
        raise PrivpostError(f"norm must be one of {NORMS}, got {norm!r}")
    if neighbours not in NEIGHBOURS:
        raise PrivpostError(f"neighbours must be one of {NEIGHBOURS}, got {neighbours!r}")


def _dim(dim: int, name: str) -> int:
    """A query's number of released coordinates, checked against
    :data:`privpost.limits` *before* labels or index arrays are built."""
    from privpost.limits import check_dim

    return check_dim(_field(name), int(dim))


#: Per-record contributions are summed in blocks of at most this many ``(row, coordinate)``
#: cells, so :meth:`Query.statistic` never holds an ``(n, d)`` matrix larger than ~32 MB.
_STAT_BLOCK_CELLS = 4_000_000


# --------------------------------------------------------------------------------------------
# record helpers (confidential records -> DataError naming the problem)
# --------------------------------------------------------------------------------------------

def _as_float(records) -> np.ndarray:
    try:
        arr = np.asarray(records, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"records: cannot be read as numbers ({exc})") from None
    return arr


def _scalar_records(records, check: bool) -> np.ndarray:
    """(n,) or (n, 1) -> (n,) float64; NaN rejected when ``check``."""
    x = _as_float(records)
    if x.ndim == 0:
        x = x.reshape(1)
    elif x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    elif x.ndim != 1:
        raise DataError(f"records: expected shape (n,) or (n, 1) for scalar records, got {x.shape}")
    if check and np.isnan(x).any():
        row = int(np.flatnonzero(np.isnan(x))[0])
        raise DataError(f"records: NaN value at row {row}")
    return x


def _table_records(records, k: int, check: bool, what: str) -> np.ndarray:
    """(n, k) float64; NaN rejected when ``check``."""
    x = _as_float(records)
    if x.ndim != 2 or x.shape[1] != k:
        raise DataError(f"records: expected shape (n, {k}) ({what}), got {x.shape}")
    if check and np.isnan(x).any():
        row, col = (int(v) for v in np.argwhere(np.isnan(x))[0])
        raise DataError(f"records: NaN value at row {row}, column {col}")
    return x


def _one_hot_sensitivity(blocks: int, norm: str, neighbours: str) -> float:
    """Sensitivity of a query whose per-record contribution is ``blocks`` one-hot vectors (one
    count per block: histogram 1, naive-Bayes tables K, cell counts D, clique tables |C|).

    Replace-one moves one count within each block: L1 2·blocks, L2 sqrt(2·blocks) (attained when
    every block's category changes). Add/remove adds or removes one count per block: L1 blocks,
    L2 sqrt(blocks). Each query's brute-force test checks its own case."""
    if neighbours == "replace":
        return 2.0 * blocks if norm == "l1" else math.sqrt(2.0 * blocks)
    return float(blocks) if norm == "l1" else math.sqrt(blocks)


def _check_levels(x: np.ndarray, upper, columns) -> None:
    """Raise :class:`DataError` naming the first entry of the categorical records ``x`` (n, k)
    outside ``0..upper[j] - 1`` of its column ``j``."""
    bad = (x < 0) | (x >= upper)
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        raise DataError(f"records: value {int(x[row, col])} at row {row}, column {col} "
                        f"({columns[col]}) is outside 0..{int(upper[col]) - 1}")


def _integer_records(records, shape_ok, shape_msg: str, check: bool) -> np.ndarray:
    """Categorical records -> int64. Floats are accepted when integral (e.g. from a CSV)."""
    try:
        arr = np.asarray(records)
    except (TypeError, ValueError) as exc:
        raise DataError(f"records: cannot be read as an array of categories ({exc})") from None
    if arr.dtype == object:
        arr = _as_float(arr)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    arr = shape_ok(arr)
    if arr is None:
        raise DataError(shape_msg)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind != "f":
        raise DataError(f"records: categories must be integers, got dtype {arr.dtype}")
    if check:
        bad = np.isnan(arr)
        if bad.any():
            idx = tuple(int(v) for v in np.argwhere(bad)[0])
            raise DataError(f"records: NaN category at index {idx}")
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            idx = tuple(int(v) for v in np.argwhere(bad)[0])
            raise DataError(f"records: non-integer category {arr[idx]!r} at index {idx}")
    return arr.astype(np.int64)


def _safe_shape(records):
    """``np.shape(records)``, or ``"ragged"`` for nested lists of unequal lengths."""
    try:
        return np.shape(records)
    except (TypeError, ValueError):
        return "a ragged (inhomogeneous) nesting"


def _to_sequence(value):
    if isinstance(value, tuple):
        return [_to_sequence(v) for v in value]
    if isinstance(value, list):
        return [_to_sequence(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------------

class Query(abc.ABC):
    """A record-additive statistic ``s(x) = sum_i t(x_i)`` with known global sensitivity.

    Attributes
    ----------
    name : str (class variable)
        Registry key (``QUERIES[name]``) and the ``"type"`` field of :meth:`to_dict`.
    dim : int
        ``d``, the number of released coordinates.
    labels : tuple[str, ...]
        Names of the ``d`` coordinates.
    columns : tuple[str, ...]
        Record fields, in column order (CSV column names by default).
    integer : bool
        The statistic is integer-valued (counts); needed by discrete mechanisms.
    """

    name: ClassVar[str]
    dim: int
    labels: tuple[str, ...]
    columns: tuple[str, ...]
    integer: bool = False

    # ---- what the guarantee does not cover -------------------------------------------------
    def not_covered(self, neighbours: str) -> tuple[str, ...]:
        """Statements of what a release of this query publishes *exactly* -- beyond its noisy
        values and the record count ``n`` -- that its privacy guarantee under ``neighbours``
        does not cover (e.g. :class:`~privpost.cell_counts.CellCounts`' cell sizes). Printed next
        to the guarantee by every command that states it. Default: nothing."""
        return ()

    # ---- records -------------------------------------------------------------------------
    @abc.abstractmethod
    def _coerce(self, records, check: bool) -> np.ndarray:
        """Shape/dtype coercion; full content checks when ``check``."""

    @abc.abstractmethod
    def _t(self, x: np.ndarray) -> np.ndarray:
        """Contributions of already-coerced records: ``(n, ...) -> (n, d)`` float64."""

    def validate_records(self, records) -> np.ndarray:
        """Coerce ``records`` to this query's layout, raising :class:`DataError` on bad records.

        Returns a float64 array (``int64`` for categorical queries) of shape ``(n,)`` for scalar
        records or ``(n, len(columns))``. Values outside the declared bounds are *not* errors.
        A pandas DataFrame is matched to :attr:`columns` **by name** (a missing or an extra
        column is a :class:`DataError`), never by position.
        """
        return self._coerce(self._by_name(records), True)

    def _by_name(self, records):
        """A DataFrame's columns selected by name in :attr:`columns` order; other input as is."""
        names = getattr(records, "columns", None)
        if names is None or not hasattr(records, "iloc") or not hasattr(records, "to_numpy"):
            return records
        have = [str(c) for c in names]
        missing = [c for c in self.columns if c not in have]
        extra = [c for c in have if c not in self.columns]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing column(s) {missing}")
            if extra:
                parts.append(f"unexpected column(s) {extra}")
            raise DataError(f"records: the DataFrame's columns {have} do not match the query's "
                            f"columns {list(self.columns)} ({'; '.join(parts)}); select or "
                            "rename them (columns are matched by name, not position)")
        if len(set(have)) != len(have):
            raise DataError(f"records: the DataFrame has duplicate column names {have}")
        frame = records.copy()
        frame.columns = have
        return frame[list(self.columns)].to_numpy()

    def t(self, records, *, check: bool = True) -> np.ndarray:
        """Per-record contributions, shape ``(n, dim)``, float64.

        ``check=False`` skips the content checks of :meth:`validate_records` (NaN, category
        range, simplex); use it only on records known to be valid, e.g. model proposals in a
        sampler's inner loop.
        """
        return self._t(self._coerce(self._by_name(records), check))

    def statistic(self, records) -> np.ndarray:
        """The (non-private) statistic ``t(records).sum(axis=0)``, shape ``(dim,)``.

        Summed in row blocks of at most ``_STAT_BLOCK_CELLS`` cells, so memory stays bounded
        for many records times many coordinates (e.g. a large histogram)."""
        x = self._coerce(self._by_name(records), True)
        rows = max(1, _STAT_BLOCK_CELLS // max(int(self.dim), 1))
        if x.shape[0] <= rows:
            return self._t(x).sum(axis=0)
        out = np.zeros(self.dim)
        for start in range(0, x.shape[0], rows):
            out += self._t(x[start:start + rows]).sum(axis=0)
        return out

    # ---- sensitivity ---------------------------------------------------------------------
    def sensitivity(self, norm: str = "l1", neighbours: str = "replace") -> float:
        """Global sensitivity ``max ||s(x) - s(x')||`` over neighbouring data sets.

        ``norm``: ``"l1"`` or ``"l2"``. ``neighbours``: ``"replace"`` (same n, one record
        replaced -- the seeds' convention) or ``"add-remove"`` (one record added or removed),
        for which the sensitivity is ``max_r ||t(r)||``.
        """
        _check_norm(norm, neighbours)
        return float(self._sensitivity(norm, neighbours))

    @abc.abstractmethod
    def _sensitivity(self, norm: str, neighbours: str) -> float: ...

    # ---- serialisation -------------------------------------------------------------------
    @abc.abstractmethod
    def _params(self) -> dict[str, Any]:
        """Constructor keyword arguments (JSON-compatible)."""

    def to_dict(self) -> dict:
        """JSON-compatible description: ``{"type": name, <constructor parameters>}``."""
        out = {"type": self.name}
        out.update({k: _to_sequence(v) for k, v in self._params().items()})
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Query":
        """Rebuild from :meth:`to_dict` output; validates every field (:class:`ReleaseError`)."""
        if not isinstance(d, dict):
            raise ReleaseError("query", f"must be a mapping, got {type(d).__name__}")
        kind = d.get("type", cls.name)
        if kind != cls.name:
            raise ReleaseError("query.type", f"expected {cls.name!r}, got {kind!r}")
        params = {k: v for k, v in d.items() if k != "type"}
        allowed = set(cls._init_fields)
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ReleaseError("query", f"unknown field(s) {unknown} for query type {cls.name!r}; "
                                        f"allowed: {sorted(allowed)}")
        missing = sorted(set(cls._required_fields) - set(params))
        if missing:
            raise ReleaseError(_field(missing[0]), f"missing (required for {cls.name!r})")
        if params.get("columns") is not None and not isinstance(params["columns"], (list, tuple)):
            # a document stores a list (found by fuzzing: "x" was accepted as ["x"])
            raise ReleaseError(_field("columns"), f"must be a list of names, got "
                               f"{params['columns']!r}")
        try:
            return cls(**params)
        except ReleaseError:
            raise
        except (TypeError, ValueError) as exc:
            raise ReleaseError("query", str(exc)) from None

    _init_fields: ClassVar[tuple[str, ...]] = ()
    _required_fields: ClassVar[tuple[str, ...]] = ()

    # ---- misc ----------------------------------------------------------------------------
    def __eq__(self, other):
        if not isinstance(other, Query):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(repr(self.to_dict()))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"


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
                             f"records: expected shape (n,) or (n, 1) of categories, "
                             f"got {_safe_shape(records)}", check)
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
        if isinstance(n_levels, (str, bytes)) or not hasattr(n_levels, "__iter__"):
            raise ReleaseError(_field("n_levels"),
                               f"must be a list of level counts (one per feature), got {n_levels!r}")
        levels = tuple(_pos_int(j, "n_levels", minimum=2) for j in n_levels)
        if not levels:
            raise ReleaseError(_field("n_levels"), "needs at least one feature")
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

        def shape_ok(a):
            return a if (a.ndim == 2 and a.shape[1] == k) else None
        x = _integer_records(records, shape_ok,
                             f"records: expected shape (n, {k}) (class, then {k - 1} features), "
                             f"got {_safe_shape(records)}", check)
        if check and x.size:
            _check_levels(x, np.concatenate([[self.n_classes], self._levels_arr]), self.columns)
        return x

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


# --------------------------------------------------------------------------------------------
# 5. Linear-regression sufficient statistics
# --------------------------------------------------------------------------------------------

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
        return 2.0 * (np.clip(z, self._lo, self._hi) - self._lo) / (self._hi - self._lo) - 1.0

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
        x = z[:, :self.p]
        return 2.0 * (np.clip(x, self._lo, self._hi) - self._lo) / (self._hi - self._lo) - 1.0

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


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------

QUERIES: dict[str, type[Query]] = {
    cls.name: cls
    for cls in (Sum, Mean, Histogram, NaiveBayesCounts, RegressionStats, CovariateMoments,
                TruncatedSum, CensoredLogMean)
}

# Clique contingency tables (seed 003 ch. 3) live in their own module, which adds
# MarginalTables to QUERIES when it is imported (skipped here if it is being imported now).
if "privpost.marginal_tables" not in __import__("sys").modules:
    import privpost.marginal_tables  # noqa: E402,F401


# seed 002's DPss score histogram lives in its own module (imported here so that it registers)
from privpost.queries_score import ThresholdScore  # noqa: E402

QUERIES[ThresholdScore.name] = ThresholdScore


def query_from_dict(d: dict) -> Query:
    """Build a query from its :meth:`Query.to_dict` form, dispatching on ``d["type"]``."""
    if not isinstance(d, dict):
        raise ReleaseError("query", f"must be a mapping, got {type(d).__name__}")
    kind = d.get("type")
    if kind is None:
        raise ReleaseError("query.type", "missing")
    if kind not in QUERIES:
        raise ReleaseError("query.type", f"unknown query type {kind!r}; known: {sorted(QUERIES)}")
    return QUERIES[kind].from_dict(d)


# Per-cell count vectors of categorical reports (seed 004's HMM release): CellCounts lives in
# its own module, which adds itself to QUERIES when imported (it imports this module's helpers).
import privpost.cell_counts  # noqa: E402,F401
