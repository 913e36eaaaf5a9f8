"""Reading confidential records from CSV or Parquet files for a release."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from privpost.errors import DataError

__all__ = ["read_records"]


def _to_numbers(series):
    """Cells -> float (NaN where not a number); never raises (huge integers become ±inf)."""
    import pandas as pd

    try:
        return pd.to_numeric(series, errors="coerce")
    except (OverflowError, ValueError):
        def one(v):
            try:
                return float(v)
            except (TypeError, ValueError, OverflowError):
                return float("nan")
        return pd.Series([one(v) for v in series], index=series.index, dtype=float)


def read_records(path: str | Path, columns: Sequence[str]) -> np.ndarray:
    """Read the named ``columns`` of a CSV or Parquet file as a float array.

    Parameters
    ----------
    path : str or Path
        ``.parquet`` / ``.pq`` files are read as Parquet, anything else as CSV (header row
        required).
    columns : sequence of str
        Columns to read, in the order the query expects them.

    Returns
    -------
    ndarray, shape (n,) for one column or (n, len(columns))

    Raises
    ------
    DataError
        The file is missing or unreadable, a column is missing, a value is not numeric, a value
        is empty, or there are no rows. The message names the column and the first bad row
        (1-based data rows, header excluded).
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    csv = path.suffix.lower() not in (".parquet", ".pq")
    try:
        if not csv:
            frame = pd.read_parquet(path)
        else:
            # cells are read as text and converted below (a 400-digit integer made pandas'
            # numeric parser raise OverflowError); a UTF-8 byte-order mark is skipped
            frame = pd.read_csv(path, skipinitialspace=True, dtype=str, encoding="utf-8-sig")
    except Exception as exc:  # pandas raises many types for unreadable files
        raise DataError(f"{path}: cannot read the file ({type(exc).__name__}: {exc})") from None
    columns = list(columns)
    names = [str(c) for c in frame.columns]
    dupes = sorted({c for c in names if c.rpartition(".")[0] in names and
                    c.rpartition(".")[2].isdigit()})
    if csv and dupes:
        raise DataError(f"{path}: duplicate column name(s) in the header (pandas renamed them "
                        f"{', '.join(map(repr, dupes))}); each column must appear once")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        hint = ""
        if csv and len(names) == 1 and any(d in names[0] for d in (";", "\t", "|")):
            hint = " (the header looks like it uses another delimiter than ',': save as CSV)"
        raise DataError(f"{path}: missing column(s) {', '.join(map(repr, missing))}; "
                        f"the file has {', '.join(map(repr, names))}{hint}")
    if len(frame) == 0:
        raise DataError(f"{path}: the file has no data rows")
    out = np.empty((len(frame), len(columns)))
    for j, col in enumerate(columns):
        values = _to_numbers(frame[col])
        bad = values.isna().to_numpy()
        if bad.any():
            row = int(np.argmax(bad))
            raw = frame[col].iloc[row]
            what = "is empty" if pd.isna(raw) else f"is not a number ({raw!r})"
            raise DataError(f"{path}: column {col!r}, row {row + 1} {what}")
        out[:, j] = values.to_numpy(dtype=float)
    if not np.all(np.isfinite(out)):
        raise DataError(f"{path}: infinite values are not allowed")
    return out[:, 0] if len(columns) == 1 else out
