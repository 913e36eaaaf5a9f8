"""Census-style noisy measurements: geography × table cells with discrete Gaussian noise.

The 2020 US Census Disclosure Avoidance System publishes its *noisy measurement files*: for each
query (a table such as "sex × age group"), each geographic unit of a level (nation, state,
county, ...) and each cell of the table, the true count plus **integer discrete Gaussian noise**,
pmf ∝ exp(−z²/(2σ²)), with σ² = 1/(2ρ) where ρ is the zCDP budget that query received at that
level (a person changes one cell of one geography by one: L2 sensitivity 1 under add/remove
neighbours, so ρ = 1/(2σ²)). This module reads that shape of data, in the layout below, into
privpost releases: one :class:`~privpost.releases.release.Release` per query, a
:class:`~privpost.queries.Histogram` over the (geography, cell) pairs with
:class:`~privpost.mechanisms.DiscreteGaussian` noise of scale σ -- the plain release path, so
``privpost infer`` runs on it.

JSON layout (``schema: privpost.census-nmf/1``)::

    {
      "schema": "privpost.census-nmf/1",
      "description": "county x sex, synthetic",          # optional
      "n": 2400,                                          # public total of persons covered
      "neighbours": "add-remove",                         # optional (the Bureau's convention)
      "queries": [
        {"name": "sex", "geolevel": "County",             # geolevel optional
         "cells": ["male", "female"],
         "variance": 1.0,                                 # σ², or "rho": 0.5 (σ² = 1/(2ρ))
         "measurements": [{"geocode": "001", "values": [612, 590]},
                          {"geocode": "003", "values": [301, 297]}]}
      ]
    }

CSV layout (one line per noisy cell; the public ``n`` is given separately, ``--n`` on the CLI)::

    geocode,query,cell,variance,value
    001,sex,male,1.0,612
    001,sex,female,1.0,590
    ...

Rules (each broken one is a :class:`~privpost.errors.ReleaseError` naming the field):
every query lists each of its geographies once and each cell of each geography once; values are
integers (discrete noise); σ² is the same for all cells of a query (one budget per query and
level); a query's cells partition the persons of each geography and its geographies partition
the ``n`` persons, so the (geography, cell) table is one histogram of ``n`` records -- several
queries on the same persons are several releases (a :class:`~privpost.releases.release.ReleaseSet` whose
ρ adds up). Sizes are bounded by :mod:`privpost.limits` (file bytes, cells per query, queries).

Coordinates are labelled ``count[<query>=<geocode>:<cell>]``.

**Neighbour relation.** σ² = 1/(2ρ) is the zCDP statement under add/remove neighbours (L2
sensitivity 1), the layout's default. The Bureau describes its 2020 files as calibrated to zCDP
with *bounded* (replace-one) neighbours; a file with ``"neighbours": "replace"`` (and a
``variance``) has privpost state the guarantee under that relation: a histogram's L2 sensitivity
is then √2, so ρ = 1/σ². The posterior is the same either way -- only σ enters the likelihood.

``variance`` is the σ² *parameter* of the discrete Gaussian, which is what σ² = 1/(2ρ) gives
and what the Bureau's files state; the actual variance of that law is below σ² by a relative
2e-7 at σ = 1 and 14 % at σ = 0.5, so a file that stated the law's actual variance instead would
need converting (privpost reads the number as the parameter).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from privpost.errors import ReleaseError

__all__ = ["CENSUS_SCHEMA", "census_from_dict", "read_census", "read_census_csv"]

CENSUS_SCHEMA = "privpost.census-nmf/1"
_TOP = ("schema", "description", "n", "neighbours", "queries")
_QUERY = ("name", "geolevel", "cells", "variance", "rho", "measurements")
_MAX_NAME = 200


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_NAME or \
            any(c in value for c in ":\n\r"):
        raise ReleaseError(field, f"must be a non-empty name of at most {_MAX_NAME} characters "
                           f"without ':' or line breaks, got {str(value)[:60]!r}")
    return value


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReleaseError(field, f"must be a number, got {str(value)[:60]!r}")
    try:
        v = float(value)
    except OverflowError:
        raise ReleaseError(field, "is too large") from None
    if not math.isfinite(v):
        raise ReleaseError(field, "must be finite")
    return v


def _variance(q: dict, field: str, neighbours: str) -> float:
    """σ² of the query: ``variance``, or 1/(2ρ) from ``rho`` (both: they must agree)."""
    var = q.get("variance")
    rho = q.get("rho")
    if var is None and rho is None:
        raise ReleaseError(f"{field}.variance", "missing (give the noise variance σ², or rho)")
    if var is not None:
        var = _number(var, f"{field}.variance")
        if not var > 0:
            raise ReleaseError(f"{field}.variance", f"must be > 0, got {var!r}")
    if rho is not None:
        rho = _number(rho, f"{field}.rho")
        if not rho > 0:
            raise ReleaseError(f"{field}.rho", f"must be > 0, got {rho!r}")
        if neighbours != "add-remove":
            raise ReleaseError(f"{field}.rho", "σ² = 1/(2ρ) is the add/remove relation's "
                               "(sensitivity 1); with replace neighbours give the variance")
        from_rho = 1.0 / (2.0 * rho)
        if var is not None and not math.isclose(var, from_rho, rel_tol=1e-9):
            raise ReleaseError(f"{field}.rho", f"{rho!r} implies σ² = {from_rho!r}, not the "
                               f"stated variance {var!r}")
        var = from_rho if var is None else var
    return var


def census_from_dict(doc: Any):
    """Releases from a ``privpost.census-nmf/1`` document (a parsed JSON object).

    Returns
    -------
    privpost.Release (one query) or privpost.ReleaseSet (several, composed: ρ adds up)
    """
    from privpost.limits import check_count, check_dim

    if not isinstance(doc, dict):
        raise ReleaseError("document", "must be a JSON object")
    if doc.get("schema") != CENSUS_SCHEMA:
        raise ReleaseError("schema", f"must be {CENSUS_SCHEMA!r}, got "
                           f"{str(doc.get('schema'))[:60]!r}")
    unknown = sorted(set(doc) - set(_TOP))
    if unknown:
        raise ReleaseError(str(unknown[0])[:60], f"is not a field of a census document "
                           f"({', '.join(_TOP)})")
    n = doc.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ReleaseError("n", f"must be the public number of persons (an integer >= 1), got "
                           f"{str(n)[:60]!r}")
    neighbours = doc.get("neighbours", "add-remove")
    if neighbours not in ("add-remove", "replace"):
        raise ReleaseError("neighbours", f"must be 'add-remove' or 'replace', got "
                           f"{str(neighbours)[:60]!r}")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ReleaseError("description", "must be a string")
    queries = doc.get("queries")
    if not isinstance(queries, list) or not queries:
        raise ReleaseError("queries", "must be a non-empty list of queries")
    check_count("queries", len(queries), "max_releases", "queries (max_releases)")
    specs = []
    names = set()
    for i, q in enumerate(queries):
        f = f"queries[{i}]"
        if not isinstance(q, dict):
            raise ReleaseError(f, "must be a JSON object")
        unknown = sorted(set(q) - set(_QUERY))
        if unknown:
            raise ReleaseError(f"{f}.{str(unknown[0])[:60]}", f"is not a field of a query "
                               f"({', '.join(_QUERY)})")
        name = _name(q.get("name"), f"{f}.name")
        if name in names:
            raise ReleaseError(f"{f}.name", f"{name!r} appears twice")
        names.add(name)
        geolevel = q.get("geolevel")
        if geolevel is not None:
            _name(geolevel, f"{f}.geolevel")
        cells = q.get("cells")
        if not isinstance(cells, list) or not cells:
            raise ReleaseError(f"{f}.cells", "must be a non-empty list of cell names")
        check_dim(f"{f}.cells", len(cells))
        for j, c in enumerate(cells):
            _name(c, f"{f}.cells[{j}]")
        if len(set(cells)) != len(cells):
            raise ReleaseError(f"{f}.cells", "has a repeated cell name")
        var = _variance(q, f, neighbours)
        meas = q.get("measurements")
        if not isinstance(meas, list) or not meas:
            raise ReleaseError(f"{f}.measurements", "must be a non-empty list of "
                               "{'geocode': ..., 'values': [...]}")
        check_dim(f"{f}.measurements", len(meas) * len(cells))
        geos, values = [], []
        for k, m in enumerate(meas):
            g = f"{f}.measurements[{k}]"
            if not isinstance(m, dict) or set(m) != {"geocode", "values"}:
                raise ReleaseError(g, "must be an object with exactly 'geocode' and 'values'")
            geos.append(_name(m["geocode"], f"{g}.geocode"))
            vals = m["values"]
            if not isinstance(vals, list) or len(vals) != len(cells):
                raise ReleaseError(f"{g}.values", f"must be a list of {len(cells)} integers "
                                   "(one per cell)")
            for j, v in enumerate(vals):
                x = _number(v, f"{g}.values[{j}]")
                if x != round(x) or abs(x) > 2.0 ** 53:
                    raise ReleaseError(f"{g}.values[{j}]", f"must be an integer (discrete "
                                       f"Gaussian noise), got {x!r}")
                values.append(x)
        if len(set(geos)) != len(geos):
            raise ReleaseError(f"{f}.measurements", "lists a geocode twice")
        specs.append((name, geolevel, list(cells), geos, values, var))
    return _releases(specs, n, neighbours, description)


def _releases(specs, n: int, neighbours: str, description: str):
    from privpost.releases.declaration import declare
    from privpost.mechanisms import DiscreteGaussian
    from privpost.queries import Histogram
    from privpost.releases.release import ReleaseSet

    out = []
    for i, (name, geolevel, cells, geos, values, var) in enumerate(specs):
        f = f"queries[{i}]"
        levels = [f"{g}:{c}" for g in geos for c in cells]
        try:
            query = Histogram(categories=len(levels), columns=[name], levels=levels)
        except ReleaseError as exc:
            raise ReleaseError(f"{f}.{exc.field.removeprefix('query.')}", exc.problem) from None
        if len(levels) < 2:
            raise ReleaseError(f"{f}.cells", "a table needs at least two (geography, cell) pairs")
        meta = {"source": "census-nmf", "census_query": name, "geocodes": geos, "cells": cells,
                "variance": var}
        if geolevel is not None:
            meta["geolevel"] = geolevel
        try:
            rel = declare(values, query=query, mechanism=DiscreteGaussian(scale=math.sqrt(var)),
                          n=n, neighbours=neighbours, metadata=meta)
        except ReleaseError as exc:
            raise ReleaseError(f"{f}.{exc.field}", exc.problem) from None
        out.append(rel)
    if len(out) == 1:
        return out[0]
    return ReleaseSet(out, description=description or "census-style noisy measurements")


_CSV_COLUMNS = ("geocode", "query", "cell", "variance", "value")


def read_census_csv(path_or_text, *, n: int, neighbours: str = "add-remove"):
    """Releases from the CSV layout (columns ``geocode,query,cell,variance,value``, optionally
    ``geolevel``; one line per noisy cell). ``n``: the public number of persons.

    ``path_or_text``: a path, or the CSV text itself (a ``str`` containing a line break).
    """
    from privpost.releases.release import _read_text

    if isinstance(path_or_text, str) and "\n" in path_or_text:
        text = path_or_text
    else:
        text = _read_text(path_or_text)
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise ReleaseError("csv", f"is not a readable CSV file ({exc})") from None
    missing = [c for c in _CSV_COLUMNS if c not in header]
    if missing:
        raise ReleaseError(f"csv.{missing[0]}", f"column missing (the header must have "
                           f"{', '.join(_CSV_COLUMNS)}; got {header[:10]})")
    extra = [c for c in header if c not in _CSV_COLUMNS + ("geolevel",)]
    if extra:
        raise ReleaseError(f"csv.{str(extra[0])[:60]}", "is not a column of the census layout")
    queries: dict[str, dict] = {}
    try:
        for line, row in enumerate(reader, start=2):
            where = f"csv line {line}"
            if None in row or any(v is None for v in row.values()):
                raise ReleaseError(where, "has a different number of fields than the header")
            q = queries.setdefault(row["query"], {"name": row["query"], "cells": [],
                                                  "geos": {}, "variance": row["variance"],
                                                  "geolevel": row.get("geolevel")})
            if row["variance"] != q["variance"]:
                raise ReleaseError(f"{where}.variance", f"{row['variance']!r} differs from "
                                   f"{q['variance']!r} earlier in query {row['query']!r} (one "
                                   "variance per query)")
            if row["cell"] not in q["cells"]:
                q["cells"].append(row["cell"])
            cells = q["geos"].setdefault(row["geocode"], {})
            if row["cell"] in cells:
                raise ReleaseError(f"{where}.cell", f"({row['geocode']!r}, {row['cell']!r}) "
                                   "appears twice")
            try:
                cells[row["cell"]] = float(row["value"])
            except ValueError:
                raise ReleaseError(f"{where}.value", f"must be a number, got "
                                   f"{row['value'][:60]!r}") from None
    except csv.Error as exc:
        raise ReleaseError("csv", f"is not a readable CSV file ({exc})") from None
    if not queries:
        raise ReleaseError("csv", "has no rows")
    doc_queries = []
    for name, q in queries.items():
        try:
            var = float(q["variance"])
        except ValueError:
            raise ReleaseError("csv.variance", f"must be a number, got "
                               f"{q['variance'][:60]!r} in query {name!r}") from None
        meas = []
        for geo, cells in q["geos"].items():
            if set(cells) != set(q["cells"]):
                lost = sorted(set(q["cells"]) - set(cells))
                raise ReleaseError("csv.cell", f"geography {geo!r} of query {name!r} lacks "
                                   f"cell(s) {lost[:5]}")
            meas.append({"geocode": geo, "values": [cells[c] for c in q["cells"]]})
        entry = {"name": name, "cells": q["cells"], "variance": var, "measurements": meas}
        if q["geolevel"]:
            entry["geolevel"] = q["geolevel"]
        doc_queries.append(entry)
    return census_from_dict({"schema": CENSUS_SCHEMA, "n": n, "neighbours": neighbours,
                             "queries": doc_queries})


def read_census(path, *, n: int | None = None, neighbours: str = "add-remove"):
    """Releases from a census file: the JSON layout, or the CSV layout (``.csv``, with ``n``)."""
    from privpost.releases.release import _parse_json, _read_text

    path = Path(path)
    if path.suffix.lower() == ".csv":
        if n is None:
            raise ReleaseError("n", "a CSV census file needs the public number of persons n")
        return read_census_csv(path, n=n, neighbours=neighbours)
    if n is not None:
        raise ReleaseError("n", "is stated inside a JSON census document; do not give it again")
    return census_from_dict(_parse_json(_read_text(path)))
