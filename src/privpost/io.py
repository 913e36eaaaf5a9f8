"""Reading confidential records from CSV or Parquet files for a release.

:func:`read_table` is the one reader of a records file (``release``, ``penalty``, ``dpss``,
``release-cells``): a CSV file is refused before pandas parses it when its header has more than
``max_columns`` columns or a column name longer than ``max_cell_chars`` characters, and after
when a cell of the columns read is longer than ``max_cell_chars`` (see :mod:`privpost.limits`);
a blank line between records is a record with empty cells (refused by the callers, never
skipped: it would change n silently); blank lines at the end of a file of several columns are
ignored (in a one-column file a blank line is also what an empty value looks like, so it is a
record there, wherever it is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from privpost.errors import DataError

__all__ = ["read_records", "read_table"]

#: bytes read from the end of a CSV file to find its trailing blank lines
_TAIL_BYTES = 1 << 16


def _check_header(path: Path) -> None:
    """The header line of a CSV file within ``max_columns`` names of ``max_cell_chars``
    characters (read with a bounded ``readline``, parsed by :mod:`csv`)."""
    import csv

    from privpost.limits import get_limits

    lim = get_limits()
    max_bytes = lim.max_columns * (4 * lim.max_cell_chars + 3) + 1024
    try:
        with open(path, "rb") as fh:
            line = fh.readline(max_bytes + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file ({exc.strerror})") from None
    if len(line) > max_bytes:
        raise DataError(f"{path}: the header line is longer than {max_bytes} bytes (more than "
                        f"max_columns = {lim.max_columns} names of max_cell_chars = "
                        f"{lim.max_cell_chars} characters; see privpost.limits)")
    text = line.decode("utf-8-sig", errors="replace").rstrip("\r\n")
    try:
        names = next(csv.reader([text], skipinitialspace=True), [])
    except csv.Error:
        return                      # pandas reports a malformed header
    if len(names) > lim.max_columns:
        raise DataError(f"{path}: the header has {len(names)} columns, more than the limit of "
                        f"{lim.max_columns} (max_columns, see privpost.limits)")
    long = [j for j, c in enumerate(names) if len(c) > lim.max_cell_chars]
    if long:
        raise DataError(f"{path}: column {long[0] + 1} of the header has a name of "
                        f"{len(names[long[0]])} characters, more than the limit of "
                        f"{lim.max_cell_chars} (max_cell_chars, see privpost.limits)")


def _trailing_blank_lines(path: Path) -> int:
    """Number of whitespace-only lines at the end of a text file (after its last record)."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - _TAIL_BYTES))
        tail = fh.read()
    lines = tail.split(b"\n")
    if tail.endswith(b"\n"):
        lines.pop()                 # the last line's terminator, not a line
    count = 0
    for line in reversed(lines[1:] if size > _TAIL_BYTES else lines):
        if line.strip():
            break
        count += 1
    return count


def _listing(names: Sequence[str], first: int = 20) -> str:
    """``'a', 'b', ...`` of at most ``first`` names (and how many more) for a message."""
    shown = ", ".join(repr(str(c)) for c in names[:first])
    return shown + (f", ... ({len(names)} columns)" if len(names) > first else "")


def read_table(path: str | Path, columns: Sequence[str] | None = None, *,
               max_rows: int | None = None, **csv_options):
    """A records file as a pandas DataFrame (CSV: every cell a string or NaN when empty).

    Parameters
    ----------
    path : str or Path
        ``.parquet`` / ``.pq`` files are read as Parquet, anything else as CSV (header row
        required; a UTF-8 byte-order mark is skipped).
    columns : sequence of str, optional
        The columns that will be used: their cells are checked against ``max_cell_chars``.
    max_rows : int, optional
        Read at most ``max_rows + 1`` data rows (the caller refuses more).
    **csv_options
        Extra :func:`pandas.read_csv` options (e.g. ``keep_default_na=False``).

    Raises
    ------
    DataError
        Missing or unreadable file, a header beyond ``max_columns`` / ``max_cell_chars``, a
        used cell longer than ``max_cell_chars``, a duplicate column name.
    """
    import pandas as pd

    from privpost.limits import get_limits

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    csv = path.suffix.lower() not in (".parquet", ".pq")
    if csv:
        _check_header(path)
    try:
        if not csv:
            frame = pd.read_parquet(path)
        else:
            # cells are read as text (a 400-digit integer made pandas' numeric parser raise
            # OverflowError); blank lines are kept as empty records (see the module docstring)
            opts = dict(skipinitialspace=True, dtype=str, encoding="utf-8-sig",
                        skip_blank_lines=False)
            opts.update(csv_options)
            if max_rows is not None:
                opts["nrows"] = max_rows + 1
            frame = pd.read_csv(path, **opts)
    except Exception as exc:  # pandas raises many types for unreadable files
        raise DataError(f"{path}: cannot read the file ({type(exc).__name__}: {exc})") from None
    names = [str(c) for c in frame.columns]
    if csv:
        present = set(names)
        dupes = sorted({c for c in names if c.rpartition(".")[0] in present and
                        c.rpartition(".")[2].isdigit()})
        if dupes:
            raise DataError(f"{path}: duplicate column name(s) in the header (pandas renamed "
                            f"them {', '.join(map(repr, dupes))}); each column must appear once")
        # trailing blank lines are not records -- except in a one-column file, where a blank
        # line is also what an empty value looks like: there it is refused like any other
        blank = _trailing_blank_lines(path) if len(frame) and frame.shape[1] > 1 else 0
        if blank:
            empty = frame.isna().all(axis=1).to_numpy()[::-1]
            drop = min(blank, int(np.argmin(empty)) if not empty.all() else len(empty))
            if drop:
                frame = frame.iloc[:len(frame) - drop]
    limit = get_limits().max_cell_chars
    for col in columns or ():
        if col in frame.columns and not pd.api.types.is_numeric_dtype(frame[col].dtype):
            lengths = frame[col].map(lambda v: len(v) if isinstance(v, str) else 0).to_numpy()
            if lengths.size and lengths.max() > limit:
                row = int(np.argmax(lengths > limit))
                raise DataError(f"{path}: column {col!r}, row {row + 1} has {int(lengths[row])} "
                                f"characters, more than the limit of {limit} (max_cell_chars, "
                                "see privpost.limits)")
    return frame


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
    columns = list(columns)
    frame = read_table(path, columns)
    csv = path.suffix.lower() not in (".parquet", ".pq")
    names = [str(c) for c in frame.columns]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        hint = ""
        if csv and len(names) == 1 and any(d in names[0] for d in (";", "\t", "|")):
            hint = " (the header looks like it uses another delimiter than ',': save as CSV)"
        raise DataError(f"{path}: missing column(s) {', '.join(map(repr, missing[:10]))}; "
                        f"the file has {_listing(names)}{hint}")
    if len(frame) == 0:
        raise DataError(f"{path}: the file has no data rows")
    out = np.empty((len(frame), len(columns)))
    for j, col in enumerate(columns):
        values = _to_numbers(frame[col])
        bad = values.isna().to_numpy()
        if bad.any():
            row = int(np.argmax(bad))
            raw = frame[col].iloc[row]
            what = ("is empty (a blank line or an empty cell: every record needs a value)"
                    if pd.isna(raw) else f"is not a number ({raw!r})")
            raise DataError(f"{path}: column {col!r}, row {row + 1} {what}")
        out[:, j] = values.to_numpy(dtype=float)
    if not np.all(np.isfinite(out)):
        raise DataError(f"{path}: infinite values are not allowed")
    return out[:, 0] if len(columns) == 1 else out
