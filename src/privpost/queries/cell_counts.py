"""Per-cell, per-feature counts of categorical records: the release behind the HMM of seed 004.

Records are reports ``(region, time, x_1, ..., x_D)`` in long format: each report lies in one
*cell* ``(r, t)`` of an ``R x T`` grid and has ``D`` categorical features, feature ``d`` with
``K_d`` levels. The released statistic is, for every cell and feature, the count vector

    n[r, t, d, j] = #{reports i in cell (r, t) : x_{i,d} = j},      j = 0..K_d - 1,

flattened in ``(r, t, d, j)`` row-major order (region outermost, level innermost), so
``dim = R * T * sum_d K_d``. The cell sizes ``N[r, t] = sum_j n[r, t, d, j]`` (equal for every
``d``) are **public** parameters of the query, as in Foulds et al. (seed 004, App. E.1 and
pitfall 5: ``N_{r,t}`` is implicitly public): inference needs them and the noisy counts alone do
not determine them -- unless they are **withheld** (``CellCounts(n_levels, n_regions=R,
n_times=T)``, no ``cell_sizes``) and released privately beside the counts by a
:class:`~privpost.queries.cell_sizes.CellSizes` release (:mod:`privpost.releases.cells`: the
pair is a :class:`~privpost.releases.ReleaseSet`; ``privpost release-cells --epsilon-sizes``).
The sensitivity below does not use the sizes (the cross-cell case is covered), so it is the
same whether they are public or withheld.

Sensitivity (derivation; ``tests/test_cell_counts.py`` checks every value by brute force)
------------------------------------------------------------------------------------------
A report contributes ``t(x) = sum_d e_{cell(x), d, x_d}``: one unit count in each of the D
feature blocks of its own cell.

* replace-one, the seeds' relation (``"replace"``). Replace report ``x`` by ``x'``.

  - Within its cell (the relation under which the public cell sizes are unchanged): in feature
    ``d`` the block ``n[r, t, d, :]`` changes by ``e_{x'_d} - e_{x_d}``, L1 norm 2 if
    ``x'_d != x_d``, else 0. So **each feature vector has L1 sensitivity 2** (the paper's value),
    and the whole statistic ``sum_d 2 = 2D`` (attained when every feature changes); L2:
    ``sqrt(2D)``.
  - Across cells (``x`` in ``c``, ``x'`` in ``c' != c``): ``-1`` in the D coordinates
    ``(c, d, x_d)`` and ``+1`` in the D coordinates ``(c', d, x'_d)``, all distinct: L1 = 2D,
    L2 = sqrt(2D) again -- the bound does not depend on whether cells are public.

  Composition view (the paper's, extract §3.4): each feature's counts are one Laplace release of
  L1 sensitivity 2 at ``eps_d``; a report touches all D features (sequential composition:
  ``eps = sum_d eps_d``) and exactly one cell (parallel composition: no factor ``R T``). With
  equal budgets ``eps_d = eps / D`` this is exactly one Laplace mechanism of scale
  ``2 / eps_d = 2D / eps`` on the whole vector, i.e. L1 sensitivity ``2D`` at total ``eps``: the
  paper's ``eps_d = 1``, ``D = 5`` is ``eps = 5`` and scale 2 per count. (Unequal per-feature
  budgets are not offered: the release document carries one noise scale.)

* add/remove (``"add-remove"``): one report adds ``+1`` in D coordinates: L1 = D, L2 = sqrt(D).
  The public cell sizes then reveal the added report's cell exactly (they are *not* covered by
  the guarantee, as the record count ``n`` of every add/remove release); use it only where the
  cell sizes are public anyway.

What else is public: ``R``, ``T``, the levels ``K_d`` and the names of regions, times and levels
(stored in the release metadata by :func:`load_long_csv`). When these are read off the
confidential file rather than declared in advance, the domain is data-dependent and not
protected (seed 004 pitfall 19): pass ``regions=``, ``times=``, ``levels=`` to fix it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from privpost.errors import DataError, ReleaseError
from privpost.queries.base import (Query, _category_table, _columns, _feature_levels, _field,
                                   _one_hot_sensitivity, _pos_int)

__all__ = ["CellCounts", "load_long_csv", "LongData"]

_NOT_GIVEN = object()       # n_regions / n_times left out (an explicit None is refused)


class CellCounts(Query):
    """Count vectors ``n[r, t, d, :]`` of D categorical features in every (region, time) cell.

    Parameters
    ----------
    n_levels : sequence of D ints >= 2
        ``K_d``, the number of levels of feature ``d``.
    cell_sizes : array_like of ints >= 0, shape (R, T), optional
        Public number of reports in each cell (``R, T >= 1``; total >= 1). ``None``: the sizes
        are withheld (not published by this release; see :mod:`privpost.releases.cells` for
        their private release); then ``n_regions`` and ``n_times`` give the grid.
    n_regions, n_times : int >= 1, optional
        ``R`` and ``T`` when ``cell_sizes`` is withheld (refused together with ``cell_sizes``).
    columns : sequence of 2 + D names, optional
        Default ``("region", "time", "x1", ..., "xD")``.

    Records: ``(n, 2 + D)`` integers ``[region, time, x_1, ..., x_D]`` with ``region in 0..R-1``,
    ``time in 0..T-1``, ``x_d in 0..K_d-1``. :meth:`statistic` also checks that the records'
    cell sizes equal ``cell_sizes`` (:class:`DataError` otherwise).

    Released: ``dim = R * T * sum_d K_d`` counts, order ``(r, t, d, j)``; :meth:`unflatten`
    gives them back as a list of D arrays of shape ``(R, T, K_d)``. Sensitivities: see the
    module docstring (replace-one L1 ``2D``, L2 ``sqrt(2D)``; add/remove ``D``, ``sqrt(D)``).
    """

    name = "cell_counts"
    _init_fields = ("n_levels", "cell_sizes", "n_regions", "n_times", "columns")
    _required_fields = ("n_levels",)

    def __init__(self, n_levels, cell_sizes=None, *, n_regions=_NOT_GIVEN, n_times=_NOT_GIVEN,
                 columns=None):
        levels = _feature_levels(n_levels)
        if len(levels) > 1000 or sum(levels) > 10**6:
            raise ReleaseError(_field("n_levels"), "too many features or levels (at most 1000 "
                               "features and 10^6 levels in total)")
        self.n_levels = levels
        self.n_features = len(levels)
        if cell_sizes is None:
            # sizes withheld (released privately beside the counts: a CellSizes release)
            if n_regions in (None, _NOT_GIVEN) or n_times in (None, _NOT_GIVEN):
                raise ReleaseError(_field("cell_sizes"), "missing: give the public cell sizes "
                                   "(a regions x times table) or, when they are withheld, "
                                   "n_regions and n_times")
            R, T = _pos_int(n_regions, "n_regions"), _pos_int(n_times, "n_times")
            if R * T > 5 * 10**7:          # before the product is printed (1e300 x 1e300)
                raise ReleaseError(_field("n_times"), "n_regions x n_times is more than 5e7 "
                                   "cells")
            dim = R * T * sum(levels)
            if dim > 5 * 10**7:
                raise ReleaseError(_field("n_times"), f"{R} x {T} cells x {sum(levels)} levels "
                                   f"= {dim} counts is more than 5e7")
            self.cell_sizes = None
            self.n_regions, self.n_times = R, T
            self._finish(columns, levels, dim)
            return
        if n_regions is not _NOT_GIVEN or n_times is not _NOT_GIVEN:
            # (an explicit null too: a document states no field it does not mean)
            raise ReleaseError(_field("n_regions" if n_regions is not _NOT_GIVEN
                                      else "n_times"), "give either the public cell_sizes table or, "
                               "when the sizes are withheld, n_regions and n_times -- not both")
        try:
            sizes = np.asarray(cell_sizes, dtype=np.float64)
        except (TypeError, ValueError):
            raise ReleaseError(_field("cell_sizes"), "must be a regions x times table of "
                               "non-negative integers, e.g. [[12, 0, 7], [3, 5, 9]]") from None
        if sizes.ndim != 2 or sizes.shape[0] < 1 or sizes.shape[1] < 1:
            raise ReleaseError(_field("cell_sizes"), "must be a regions x times table (a list of "
                               f"R >= 1 rows of T >= 1 counts), got shape {sizes.shape}")
        if not np.all(np.isfinite(sizes)) or np.any(sizes < 0) or np.any(sizes != np.round(sizes)):
            raise ReleaseError(_field("cell_sizes"), "must hold non-negative integers")
        if sizes.sum() < 1:
            raise ReleaseError(_field("cell_sizes"), "the cells hold no report (total must be >= 1)")
        from privpost.limits import check_n

        # before the int64 cast (1e300 would wrap): the total is a record count (max_n)
        check_n(_field("cell_sizes"), int(min(sizes.sum(), 2.0 ** 62)))
        dim = sizes.size * sum(levels)
        if dim > 5 * 10**7:
            raise ReleaseError(_field("cell_sizes"), f"{sizes.shape[0]} x {sizes.shape[1]} cells "
                               f"x {sum(levels)} levels = {dim} counts is more than 5e7")
        self.cell_sizes = sizes.astype(np.int64)
        self.cell_sizes.setflags(write=False)
        self.n_regions, self.n_times = (int(v) for v in sizes.shape)
        self._finish(columns, levels, dim)

    def _finish(self, columns, levels, dim) -> None:
        D = self.n_features
        self.columns = _columns(columns, ("region", "time") + tuple(f"x{d + 1}" for d in range(D)))
        self._levels_arr = np.asarray(levels, dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(levels)[:-1]]).astype(np.int64)
        self.width = int(sum(levels))          # counts per cell
        self.dim = int(dim)
        self.integer = True

    @property
    def labels(self) -> tuple[str, ...]:
        cols = self.columns
        return tuple(f"n[{r},{t},{cols[2 + d]}={j}]"
                     for r in range(self.n_regions) for t in range(self.n_times)
                     for d, K in enumerate(self.n_levels) for j in range(K))

    @property
    def sizes_public(self) -> bool:
        """Whether the query carries the exact cell sizes (False: withheld, e.g. released
        privately by a :class:`~privpost.queries.cell_sizes.CellSizes` release beside it)."""
        return self.cell_sizes is not None

    @property
    def n_total(self) -> int | None:
        """The sum of the public cell sizes (``None`` when they are withheld)."""
        return None if self.cell_sizes is None else int(self.cell_sizes.sum())

    # ---- layout helpers ------------------------------------------------------------------
    def unflatten(self, values) -> list[np.ndarray]:
        """``(dim,)`` -> list of D arrays ``(R, T, K_d)`` (feature d's counts in every cell)."""
        v = np.asarray(values, dtype=np.float64).reshape(self.n_regions, self.n_times, self.width)
        return [v[:, :, o:o + K].copy() for o, K in zip(self._offsets, self.n_levels)]

    def cell_matrix(self, values) -> np.ndarray:
        """``(dim,)`` -> ``(R * T, sum_d K_d)``: row ``r * T + t`` holds cell (r, t)'s counts."""
        return np.asarray(values, dtype=np.float64).reshape(self.n_regions * self.n_times,
                                                            self.width)

    # ---- records -------------------------------------------------------------------------
    def _coerce(self, records, check):
        k = 2 + self.n_features
        return _category_table(
            records, np.concatenate([[self.n_regions, self.n_times], self._levels_arr]),
            self.columns, f"records: expected shape (n, {k}) (region, time, then {k - 2} "
            "features)", check)

    def _t(self, x):
        n = x.shape[0]
        out = np.zeros((n, self.dim))
        if n:
            cell = x[:, 0] * self.n_times + x[:, 1]
            idx = cell[:, None] * self.width + self._offsets[None, :] + x[:, 2:]
            out[np.arange(n)[:, None], idx] = 1.0
        return out

    def statistic(self, records) -> np.ndarray:
        """The exact counts, shape ``(dim,)`` (computed without the ``(n, dim)`` one-hot array).

        Raises :class:`DataError` when the records' cell sizes differ from ``cell_sizes``.
        """
        x = self.validate_records(records)
        cell = x[:, 0] * self.n_times + x[:, 1]
        sizes = np.bincount(cell, minlength=self.n_regions * self.n_times)
        if self.cell_sizes is not None and not np.array_equal(sizes, self.cell_sizes.ravel()):
            bad = int(np.flatnonzero(sizes != self.cell_sizes.ravel())[0])
            r, t = divmod(bad, self.n_times)
            raise DataError(f"records: cell (region {r}, time {t}) holds {int(sizes[bad])} "
                            f"reports but the query's public cell_sizes says "
                            f"{int(self.cell_sizes[r, t])}")
        idx = (cell[:, None] * self.width + self._offsets[None, :] + x[:, 2:]).ravel()
        return np.bincount(idx, minlength=self.dim).astype(np.float64)

    def not_covered(self, neighbours: str) -> tuple[str, ...]:
        """The cell sizes: published exactly, not covered by the release's guarantee (see the
        module docstring: a neighbour that moves a report to another cell changes them); nothing
        when the sizes are withheld."""
        if self.cell_sizes is None:
            return ()
        return (f"the cell sizes N[r, t] ({self.n_regions} x {self.n_times} table, total "
                f"{self.n_total}) are published exactly, without noise: the privacy guarantee "
                "covers the noisy counts, not the cell sizes (a report's cell is protected only "
                "if the cell sizes are public anyway)",)

    def _sensitivity(self, norm, neighbours):
        return _one_hot_sensitivity(self.n_features, norm, neighbours)   # derivation above

    def _params(self):
        if self.cell_sizes is None:       # "cell_sizes": null -- withheld, said explicitly
            return {"n_levels": self.n_levels, "cell_sizes": None, "n_regions": self.n_regions,
                    "n_times": self.n_times, "columns": self.columns}
        return {"n_levels": self.n_levels, "cell_sizes": self.cell_sizes.tolist(),
                "columns": self.columns}

    def __repr__(self):
        if self.cell_sizes is None:
            return (f"CellCounts(n_levels={self.n_levels!r}, n_regions={self.n_regions}, "
                    f"n_times={self.n_times}, cell sizes withheld)")
        return (f"CellCounts(n_levels={self.n_levels!r}, cell_sizes=<{self.n_regions}x"
                f"{self.n_times}, total {self.n_total}>)")



# --------------------------------------------------------------------------------------------
# long-format CSV loader
# --------------------------------------------------------------------------------------------

class LongData:
    """Reports read from a long-format table, encoded for :class:`CellCounts`.

    Attributes
    ----------
    records : int64 array (n, 2 + D)
        ``[region index, time index, level index of each feature]``.
    regions, times : list of str
        Names of the region / time codes, in index order.
    levels : list of D lists of str
        Names of each feature's levels, in index order.
    features : list of str
        Feature column names.
    cell_sizes : int64 array (R, T)
    from_data : list of str
        The parts of the domain read from the file rather than declared (``"region codes"``,
        ``"time codes"``, ``"levels of feature 'x'"``): the distinct values of the confidential
        data, published exactly by the release and not covered by its guarantee.
    """

    def __init__(self, records, regions, times, levels, features, cell_sizes, from_data=()):
        self.records = records
        self.regions = regions
        self.times = times
        self.levels = levels
        self.features = features
        self.cell_sizes = cell_sizes
        self.from_data = list(from_data)

    def query(self, withhold_sizes: bool = False) -> CellCounts:
        """The :class:`CellCounts` query of these reports: the public cell sizes included, or
        (``withhold_sizes=True``) withheld, the grid only (their private release:
        :func:`privpost.releases.cells.release_cells`)."""
        if withhold_sizes:
            R, T = self.cell_sizes.shape
            return CellCounts([len(lv) for lv in self.levels], n_regions=int(R),
                              n_times=int(T), columns=["region", "time", *self.features])
        return CellCounts([len(lv) for lv in self.levels], self.cell_sizes,
                          columns=["region", "time", *self.features])

    def metadata(self) -> dict[str, Any]:
        """The release document's metadata: the public domain names and, when part of the
        domain was read from the file (:attr:`from_data`), ``"domain_from_data"`` listing it
        (:data:`privpost.queries.base.DOMAIN_FROM_DATA`: every command and every posterior
        made from the release states it as not covered by the guarantee) and, when the region
        or time codes were, a ``"domain_note"`` sentence. ``privpost release-cells`` writes
        exactly this; pass it as ``release(..., metadata=data.metadata())``."""
        from privpost.queries.base import DOMAIN_FROM_DATA

        meta: dict[str, Any] = {"regions": self.regions, "times": self.times,
                                "levels": {f: lv for f, lv in zip(self.features, self.levels)}}
        if any(part in ("region codes", "time codes") for part in self.from_data):
            meta["domain_note"] = ("region/time codes taken from the confidential file: the "
                                   "grid is data-dependent and not covered by the guarantee")
        if self.from_data:
            meta[DOMAIN_FROM_DATA] = list(self.from_data)
        return meta


def _domain(values: np.ndarray, declared, what: str, path) -> tuple[list[str], np.ndarray]:
    # Python strings, not NumPy's fixed-width unicode (n x the longest cell x 4 bytes)
    vals = [str(v) for v in values.tolist()]
    if declared is None:
        names = sorted(set(vals), key=_natural_key)
    else:
        names = [str(v) for v in declared]
        if len(set(names)) != len(names):
            raise DataError(f"{what}: the declared values contain duplicates")
    index = {v: i for i, v in enumerate(names)}
    codes = np.fromiter((index.get(v, -1) for v in vals), dtype=np.int64, count=len(vals))
    if np.any(codes < 0):
        row = int(np.flatnonzero(codes < 0)[0])
        raise DataError(f"{path}: column {what!r}, row {row + 1}: value {vals[row]!r} is not "
                        f"among the declared values {names[:10]}{' ...' if len(names) > 10 else ''}")
    return names, codes


def _natural_key(s: str):
    try:
        return (0, float(s), s)
    except ValueError:
        return (1, 0.0, s)


def load_long_csv(path: str | Path, features: Sequence[str], *, region: str = "region",
                  time: str = "time", regions=None, times=None, levels=None,
                  max_rows: int = 50_000_000) -> LongData:
    """Read a long-format CSV/Parquet file of reports: one row per report.

    Parameters
    ----------
    path : str or Path
        CSV (header row required) or Parquet (``.parquet`` / ``.pq``).
    features : sequence of D column names
        The categorical feature columns (any values: strings or numbers; each distinct value is
        a level).
    region, time : str
        Column names of the region and time codes (any values).
    regions, times : sequence, optional
        The public list of region / time codes (in order). Default: the sorted distinct values
        in the file (numbers numerically), which makes the domain data-dependent (see the module
        docstring); cells of the declared grid without a report get size 0.
    levels : dict feature -> sequence, optional
        Public levels of some features (default: the sorted distinct values).

    Returns
    -------
    LongData

    Raises
    ------
    DataError
        Missing file or column, empty values, a value outside a declared domain, fewer than two
        levels in a feature, no rows. Messages name the column and the 1-based data row.
    """
    from privpost.io import _listing, read_table

    path = Path(path)
    features = [str(f) for f in features]
    if not features:
        raise DataError("features: give at least one feature column")
    cols = [region, time, *features]
    if len(set(cols)) != len(cols):
        raise DataError(f"columns must be distinct, got {cols}")
    # the shared reader: column / cell-length limits, blank lines kept as empty records
    frame = read_table(path, cols, max_rows=max_rows, keep_default_na=False, na_values=[""])
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(map(repr, missing))}; the file has "
                        f"{_listing([str(c) for c in frame.columns])}; name them with "
                        "--region, --time and --feature")
    if len(frame) == 0:
        raise DataError(f"{path}: the file has no data rows")
    if len(frame) > max_rows:
        raise DataError(f"{path}: more than {max_rows} rows")
    for c in cols:
        empty = frame[c].isna().to_numpy()
        if empty.any():
            raise DataError(f"{path}: column {c!r}, row {int(np.argmax(empty)) + 1} is empty")
    levels = dict(levels or {})
    unknown = sorted(set(levels) - set(features))
    if unknown:
        raise DataError(f"levels: {unknown} are not feature columns ({features})")
    reg_names, reg = _domain(frame[region].to_numpy(), regions, region, path)
    time_names, tim = _domain(frame[time].to_numpy(), times, time, path)
    lv_names, codes = [], []
    for f in features:
        names, c = _domain(frame[f].to_numpy(), levels.get(f), f, path)
        if len(names) < 2:
            raise DataError(f"{path}: feature {f!r} has {len(names)} level(s); a feature needs at "
                            "least 2 (declare its levels with levels= / --levels)")
        lv_names.append(names)
        codes.append(c)
    records = np.column_stack([reg, tim, *codes]).astype(np.int64)
    R, T = len(reg_names), len(time_names)
    sizes = np.bincount(reg * T + tim, minlength=R * T).reshape(R, T).astype(np.int64)
    # the parts of the domain not declared: the file's distinct values (module docstring)
    from_data = ([f"{w} codes" for w, d in (("region", regions), ("time", times)) if d is None]
                 + [f"levels of feature {f!r}" for f in features if levels.get(f) is None])
    return LongData(records, reg_names, time_names, lv_names, features, sizes, from_data)
