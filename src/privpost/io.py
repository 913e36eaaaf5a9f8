"""Reading confidential records from CSV or Parquet files for a release."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from privpost.errors import DataError

__all__ = ["read_records"]


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
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, skipinitialspace=True)
    except Exception as exc:  # pandas raises many types for unreadable files
        raise DataError(f"{path}: cannot read the file ({exc})") from None
    columns = list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(map(repr, missing))}; "
                        f"the file has {', '.join(map(repr, map(str, frame.columns)))}")
    if len(frame) == 0:
        raise DataError(f"{path}: the file has no data rows")
    out = np.empty((len(frame), len(columns)))
    for j, col in enumerate(columns):
        values = pd.to_numeric(frame[col], errors="coerce")
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
