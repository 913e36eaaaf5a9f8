"""The Query interface and the helpers every query kind shares (see :mod:`privpost.queries`)."""

from __future__ import annotations

import abc
import math
import numbers
from typing import Any, ClassVar

import numpy as np

from privpost.errors import DataError, PrivpostError, ReleaseError


NORMS = ("l1", "l2")
NEIGHBOURS = ("replace", "add-remove")

#: metadata key listing the parts of a release's domain read from the confidential data (e.g.
#: ``["region codes", "levels of feature 'smoker'"]``; written by ``privpost release-cells`` and
#: :meth:`privpost.queries.cell_counts.LongData.metadata`; every command and posterior made from
#: the release states them as not covered by the guarantee)
DOMAIN_FROM_DATA = "domain_from_data"


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


def _feature_levels(value) -> tuple[int, ...]:
    """``n_levels``: a non-empty list of level counts, one per feature, each an integer >= 2
    (a :class:`ReleaseError` naming ``n_levels`` otherwise)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ReleaseError(_field("n_levels"),
                           f"must be a list of level counts (one per feature), got {value!r}")
    levels = tuple(_pos_int(j, "n_levels", minimum=2) for j in value)
    if not levels:
        raise ReleaseError(_field("n_levels"), "needs at least one feature")
    return levels


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


def _integer_records(records, shape_ok, expected: str, check: bool) -> np.ndarray:
    """Categorical records -> int64. Floats are accepted when integral (e.g. from a CSV).

    ``shape_ok(arr)`` returns the array in the query's layout or ``None``; then a
    :class:`DataError` ``"{expected}, got {the records' shape}"`` (the shape is that of the array
    already read: no second conversion of the records, and a ragged nesting never gets here --
    it is refused as unreadable)."""
    try:
        arr = np.asarray(records)
    except (TypeError, ValueError) as exc:
        raise DataError(f"records: cannot be read as an array of categories ({exc})") from None
    if arr.dtype == object:
        arr = _as_float(arr)
    shape = arr.shape
    if arr.ndim == 0:
        arr = arr.reshape(1)
    arr = shape_ok(arr)
    if arr is None:
        raise DataError(f"{expected}, got {shape}")
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


def _category_table(records, upper, columns, expected: str, check: bool,
                    one_d: bool = False) -> np.ndarray:
    """Categorical records of shape ``(n, k)``, ``k = len(upper)`` (``one_d``: ``(n,)`` too when
    ``k == 1``), as int64 ``(n, k)``; with ``check`` every entry of column ``j`` in
    ``0..upper[j] - 1`` (:func:`_check_levels`). ``expected`` describes the layout in the
    refusal of a wrong shape (:func:`_integer_records`)."""
    k = len(upper)

    def shape_ok(a):
        if one_d and k == 1 and a.ndim == 1:
            return a[:, None]
        return a if (a.ndim == 2 and a.shape[1] == k) else None
    x = _integer_records(records, shape_ok, expected, check)
    if check and x.size:
        _check_levels(x, upper, columns)
    return x


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
        does not cover (e.g. :class:`~privpost.queries.cell_counts.CellCounts`' cell sizes). Printed next
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
