"""The release document: what a curator publishes and what an analyst's inference reads.

A :class:`Release` binds a query (which statistic, with its public parameters), a calibrated
mechanism (noise family, scale, privacy guarantee), the public record count ``n`` and the noisy
values. It is saved as a plain JSON document with a schema version::

    {
      "schema": "privpost.release/1",
      "query": {"type": "sum", "bounds": [0.0, 1.0]},
      "mechanism": {"type": "laplace", "epsilon": 1.0, "sensitivity": 1.0, "scale": 1.0, ...},
      "neighbours": "replace",
      "n": 100,
      "labels": ["sum"],
      "observed": [52.31],
      "privacy": {"kind": "pure", "epsilon": 1.0, "delta": 0.0, ...},
      "metadata": {"created": "...", "privpost_version": "0.1.0"}
    }

Loading validates everything and raises :class:`~privpost.errors.ReleaseError` naming the field
at fault; it never lets a malformed document through to inference.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privpost.errors import PrivpostError, ReleaseError

__all__ = ["Release", "ReleaseSet", "release", "SCHEMA", "SET_SCHEMA", "NEIGHBOURS",
           "unprotected", "not_covered_notes", "NOT_COVERED"]

SCHEMA = "privpost.release/1"
SET_SCHEMA = "privpost.release-set/1"
NEIGHBOURS = ("replace", "add-remove")
_REQUIRED = ("schema", "query", "mechanism", "neighbours", "n", "observed")


def _check_neighbours(value: Any, field_name: str = "neighbours") -> str:
    if value not in NEIGHBOURS:
        raise ReleaseError(field_name, f"must be one of {list(NEIGHBOURS)}, got {value!r}")
    return value


def _local(mechanism) -> bool:
    """Local mechanisms (randomized response) release one noisy report per record."""
    return getattr(mechanism, "name", None) == "randomized_response"




def unprotected(query, neighbours: str, n: int, metadata=None) -> tuple[str, ...]:
    """Statements of what a release publishes exactly that its guarantee does not cover.

    * the query's own (:meth:`privpost.queries.Query.not_covered`, e.g. HMM cell sizes);
    * the record count ``n`` under ``"add-remove"`` neighbours: every release document publishes
      ``n`` exactly, and adding or removing a record changes it, so the add/remove guarantee
      covers the noisy values only (under replace-one ``n`` is the same for all neighbours and
      publishing it costs nothing; a ``Mean``'s public denominator is the same ``n``);
    * a domain read from the confidential data (``metadata["domain_from_data"]``: region/time
      codes or feature levels taken as the distinct values of the file), which reveals which
      values occur.

    ``metadata`` comes from documents (hostile): only a list of strings is read, at most 20
    entries of at most 80 characters each.
    """
    from privpost.queries.base import DOMAIN_FROM_DATA

    out = list(query.not_covered(neighbours))
    if neighbours == "add-remove":
        out.append(f"the record count n = {int(n)} is published exactly, without noise: under "
                   "add/remove neighbours adding or removing a record changes it, so the "
                   "guarantee covers the noisy values, not n (publish under add/remove only "
                   "where the count is public anyway)")
    parts = (metadata or {}).get(DOMAIN_FROM_DATA) if isinstance(metadata, dict) else None
    if parts:
        items = ([str(v)[:80] for v in parts[:20] if isinstance(v, str)]
                 if isinstance(parts, list) else [])
        what = ", ".join(items) + (", ..." if isinstance(parts, list) and len(parts) > 20
                                   else "") if items else "part of the domain"
        out.append(f"the domain ({what}) was read from the confidential data (the distinct "
                   "values of the file) and is published exactly: which values occur is not "
                   "covered by the guarantee (declare the public domain instead)")
    return tuple(out)


#: how a not-covered statement is introduced wherever it is printed or kept (the CLI's release,
#: declare, inspect, bundle and infer output; every posterior's notes: :func:`not_covered_notes`)
NOT_COVERED = "NOT covered by the privacy guarantee: "


def not_covered_notes(doc) -> list[str]:
    """The not-covered statements of a release, release set or transcript (``doc.not_covered``:
    :func:`unprotected`) as notes, each starting with :data:`NOT_COVERED`; ``[]`` for a
    document without statements or without the attribute (``None``, penalty transcripts)."""
    return [NOT_COVERED + str(text) for text in getattr(doc, "not_covered", ()) or ()]


@dataclass(frozen=True, eq=False)
class Release:
    """A differentially private release of one statistic of a confidential data set.

    Parameters
    ----------
    query : privpost.queries.Query
        The statistic, with its public parameters (bounds, categories, ...).
    mechanism : privpost.mechanisms.Mechanism
        The calibrated noise mechanism (its ``scale`` and ``sensitivity`` are set).
    n : int
        Public number of confidential records (>= 1).
    observed : ndarray, shape (d,)
        The noisy values, ``d = query.dim`` (for randomized response: one report per record,
        ``d = n``).
    neighbours : {"replace", "add-remove"}
        Neighbour relation under which the privacy guarantee holds. Replace-one (bounded DP) is
        the default and the convention of the papers; ``n`` is then the same for all
        neighbours, so publishing it costs nothing. Under add/remove neighbours the guarantee
        covers ``observed`` only: the document also publishes the exact ``n`` (and queries with
        a public denominator, ``Mean`` and ``CensoredLogMean``, must equal it), which is *not*
        protected -- use add/remove only where the record count is already public.
        Randomized response is accepted under replace-one neighbours only.
    metadata : dict
        Free-form JSON-serialisable information (creation time, description, ...).
    """

    query: Any
    mechanism: Any
    n: int
    observed: np.ndarray
    neighbours: str = "replace"
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_neighbours(self.neighbours)
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)):
            raise ReleaseError("n", f"must be an integer, got {self.n!r}")
        if self.n < 1:
            raise ReleaseError("n", f"must be >= 1, got {self.n}")
        from privpost.limits import check_n

        check_n("n", int(self.n))
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "metadata", _json_metadata(self.metadata))
        try:
            observed = np.asarray(self.observed, dtype=float)
        except (TypeError, ValueError):
            raise ReleaseError("observed", "must be a list of numbers") from None
        if observed.ndim != 1:
            raise ReleaseError("observed", f"must be one-dimensional, got shape {observed.shape}")
        if not np.all(np.isfinite(observed)):
            raise ReleaseError("observed", "contains NaN or infinite values")
        expected = self.n if _local(self.mechanism) else self.query.dim
        if observed.size != expected:
            raise ReleaseError("observed", f"has {observed.size} values but the query "
                               f"{self.query.name!r} releases {expected}")
        if self.mechanism.discrete and not np.all(observed == np.round(observed)):
            raise ReleaseError("observed", f"the {self.mechanism.name} mechanism releases "
                               "integers, but the values are not all integers")
        observed.setflags(write=False)
        object.__setattr__(self, "observed", observed)
        self._check_calibration()
        query_n = getattr(self.query, "n", None)
        if query_n is not None and int(query_n) != self.n:
            raise ReleaseError("n", f"{self.n} differs from the query's public n = {query_n}")
        cells_n = getattr(self.query, "n_total", None)      # CellCounts: public cell sizes
        if cells_n is not None and int(cells_n) != self.n:
            raise ReleaseError("n", f"{self.n} differs from the sum of the query's public cell "
                               f"sizes, {cells_n}")

    def _check_calibration(self) -> None:
        """The stated guarantee must follow from the query and the mechanism.

        Additive mechanisms: the mechanism's sensitivity must be at least the query's sensitivity
        in the mechanism's norm under this release's neighbour relation (compared exactly: the
        guarantee is computed from the mechanism's sensitivity, and JSON round-trips floats
        exactly). Randomized response: replace-one neighbours only, a Histogram query with the
        mechanism's number of categories, reports in ``0..k-1``.
        """
        mech = self.mechanism
        if _local(mech):
            if self.neighbours != "replace":
                raise ReleaseError("neighbours", "randomized response is ε-DP for replace-one "
                                   "neighbours only (the number of reports reveals n)")
            if getattr(self.query, "name", None) != "histogram" or \
                    self.query.categories != mech.categories:
                raise ReleaseError("query", f"randomized response with {mech.categories} "
                                   "categories needs a histogram query with the same number of "
                                   "categories")
            if np.any(self.observed < 0) or np.any(self.observed >= mech.categories):
                raise ReleaseError("observed", f"reports must lie in 0..{mech.categories - 1}")
            return
        if getattr(mech, "scale", None) is None:
            raise ReleaseError("mechanism", "is not calibrated (no noise scale)")
        if mech.discrete and not self.query.integer:
            raise ReleaseError("mechanism", f"{mech.name} adds integer noise, but the query "
                               f"{self.query.name!r} is not integer-valued")
        needed = self.query.sensitivity(mech.sensitivity_norm, self.neighbours)
        if mech.sensitivity is None or mech.sensitivity < needed:
            raise ReleaseError(
                "mechanism.sensitivity",
                f"{mech.sensitivity} is below the query's {mech.sensitivity_norm.upper()} "
                f"sensitivity {needed:g} under {self.neighbours} neighbours: the stated privacy "
                "guarantee would not hold")

    # ------------------------------------------------------------------ facts
    @property
    def privacy(self):
        """The privacy guarantee (:class:`privpost.accounting.Privacy`) under ``neighbours``."""
        from dataclasses import replace

        return replace(self.mechanism.privacy, neighbours=self.neighbours)

    @property
    def not_covered(self) -> tuple[str, ...]:
        """What this release publishes exactly that :attr:`privacy` does not cover
        (:func:`unprotected`: the query's own statements, the record count ``n`` under
        add/remove neighbours, a domain read from the confidential data); empty for most
        replace-one releases."""
        return unprotected(self.query, self.neighbours, self.n, self.metadata)

    @property
    def dim(self) -> int:
        return int(self.observed.size)

    @property
    def labels(self) -> list[str]:
        if _local(self.mechanism):
            return [f"report[{i}]" for i in range(self.n)]
        return list(self.query.labels)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        """The JSON document (a plain dict). ``metadata["not_covered"]`` is always
        :attr:`not_covered` (recomputed; :meth:`from_dict` refuses a stored list that differs)."""
        meta = dict(self.metadata)
        meta.pop("not_covered", None)
        if self.not_covered:
            meta["not_covered"] = list(self.not_covered)
        return {
            "schema": SCHEMA,
            "query": self.query.to_dict(),
            "mechanism": self.mechanism.to_dict(),
            "neighbours": self.neighbours,
            "n": self.n,
            "labels": self.labels,
            "observed": [float(v) for v in self.observed],
            "privacy": self.privacy.to_dict(),
            "metadata": meta,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self, path: str | Path) -> Path:
        """Write the JSON document to ``path``; returns the path."""
        path = Path(path)
        path.write_text(self.to_json() + "\n")
        return path

    @classmethod
    def from_dict(cls, doc: Any) -> "Release":
        """Validate a JSON document and build the release (raises :class:`ReleaseError`)."""
        from privpost.mechanisms import mechanism_from_dict
        from privpost.queries import query_from_dict

        if not isinstance(doc, dict):
            raise ReleaseError("document", "must be a JSON object")
        for key in _REQUIRED:
            if key not in doc:
                raise ReleaseError(key, "is missing")
        unknown = sorted(set(doc) - set(_REQUIRED) - {"labels", "privacy", "metadata"})
        if unknown:
            raise ReleaseError(str(unknown[0]), "is not a field of a release document (fields: "
                               f"{', '.join(_REQUIRED + ('labels', 'privacy', 'metadata'))})")
        if doc["schema"] != SCHEMA:
            raise ReleaseError("schema", f"unsupported schema {doc['schema']!r} (expected {SCHEMA!r})")
        neighbours = _check_neighbours(doc["neighbours"])
        for key in ("query", "mechanism"):
            if not isinstance(doc[key], dict):
                raise ReleaseError(key, "must be a JSON object")
        query = _wrap("query", query_from_dict, doc["query"])
        mdoc = dict(doc["mechanism"])
        stated = mdoc.setdefault("neighbours", neighbours)   # absent: the document's relation
        mechanism = _wrap("mechanism", mechanism_from_dict, mdoc)
        observed = doc["observed"]
        if not isinstance(observed, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in observed):
            raise ReleaseError("observed", "must be a list of numbers")
        if any(not _finite_number(v) for v in observed):
            raise ReleaseError("observed", "contains NaN, infinite or out-of-range values")
        metadata = doc.get("metadata", {})
        if not isinstance(metadata, dict):
            raise ReleaseError("metadata", "must be a JSON object")
        rel = cls(query=query, mechanism=mechanism, n=doc["n"],
                  observed=np.asarray(observed, dtype=float), neighbours=neighbours,
                  metadata=metadata)
        if stated != neighbours:        # after the calibration check, which names the cause
            raise ReleaseError("mechanism.neighbours", f"{stated!r} contradicts the document's "
                               f"neighbours {neighbours!r}")
        if "labels" in doc and (not isinstance(doc["labels"], list) or doc["labels"] != rel.labels):
            raise ReleaseError("labels", "do not match the query's released coordinates (a "
                               "list of strings, one per observed value)")
        if "privacy" in doc:
            _check_privacy(doc["privacy"], rel.privacy)
        # derived, like labels and privacy: a stored list must be what the release publishes
        # unprotected (issue 23: a document may not say less -- or other -- than the truth)
        stored = rel.metadata.pop("not_covered", None)
        if stored is not None and stored != list(rel.not_covered):
            raise ReleaseError("metadata.not_covered", "does not match what this release "
                               "publishes without protection (recomputed from its query, "
                               "neighbours, n and metadata.domain_from_data); remove or correct it")
        if rel.not_covered:
            rel.metadata["not_covered"] = list(rel.not_covered)
        return rel

    @classmethod
    def from_json(cls, text: str) -> "Release":
        return cls.from_dict(_parse_json(text))

    @classmethod
    def load(cls, path: str | Path) -> "Release":
        """Read and validate a release JSON file (raises :class:`ReleaseError`)."""
        return cls.from_dict(_parse_json(_read_text(path)))

    def __repr__(self) -> str:
        vals = np.array2string(self.observed[:6], precision=4, separator=", ")
        more = ", ..." if self.dim > 6 else ""
        return (f"Release(query={self.query.name!r}, mechanism={self.mechanism.name!r}, "
                f"{_scale_repr(self.mechanism)}, n={self.n}, observed={vals[:-1]}{more}])")


def _scale_repr(mechanism) -> str:
    """``scale=…`` for additive mechanisms, ``epsilon=…`` for randomized response (no scale)."""
    scale = getattr(mechanism, "scale", None)
    if scale is None:
        return f"epsilon={mechanism.epsilon:.6g}, categories={mechanism.categories}" \
            if _local(mechanism) else "scale=None"
    return f"scale={scale:.6g}"


def _finite_number(v) -> bool:
    try:
        return math.isfinite(float(v))
    except OverflowError:          # an int beyond the float range
        return False


def _read_text(path) -> str:
    """A document's text: size-limited, UTF-8 (an error naming the file otherwise)."""
    from privpost.limits import get_limits

    path = Path(path)
    limit = get_limits().max_document_bytes
    try:
        size = path.stat().st_size
        if size > limit:
            raise ReleaseError("file", f"{path} is {size} bytes, above the limit of {limit} "
                               "(max_document_bytes, see privpost.limits)")
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise ReleaseError("file", f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > limit:
        raise ReleaseError("file", f"{path} is above the limit of {limit} bytes")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReleaseError("file", f"{path} is not UTF-8 text (invalid byte at offset "
                           f"{exc.start}); a release document is a UTF-8 JSON file") from None


def _parse_json(text: str):
    """``json.loads`` with every failure mode (syntax, nesting depth, integers of more than
    4300 digits) turned into a :class:`ReleaseError` on ``document``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReleaseError("document", f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ReleaseError("document", "is nested too deeply to be a release document") from None
    except ValueError as exc:      # e.g. an integer literal with more than 4300 digits
        raise ReleaseError("document", f"is not a valid release document ({exc})") from None


def _json_metadata(meta: Any) -> dict:
    """``metadata`` as plain JSON: NumPy scalars and arrays become Python numbers and lists,
    tuples become lists; NaN/infinity, non-string keys, other objects and nesting deeper than
    ``max_metadata_depth`` are refused with a :class:`ReleaseError` naming the entry."""
    from privpost.limits import get_limits

    max_depth = get_limits().max_metadata_depth
    if not isinstance(meta, dict):
        raise ReleaseError("metadata", "must be a JSON object (a dict)")

    def conv(value, where: str, depth: int):
        if depth > max_depth:
            raise ReleaseError(where, f"is nested deeper than {max_depth} levels")
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            if not _finite_number(value):
                raise ReleaseError(where, "is an integer too large for JSON numbers")
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ReleaseError(where, f"is {value}; JSON has no NaN or infinity (store "
                                   "it as a string or leave it out)")
            return value
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise ReleaseError(where, f"has a non-string key {k!r}")
                out[k] = conv(v, f"{where}.{k}", depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            return [conv(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        raise ReleaseError(where, f"{type(value).__name__} is not JSON-serialisable (use "
                           "numbers, strings, lists and dicts)")

    return conv(meta, "metadata", 0)


def _check_seed(seed) -> None:
    """``seed``: None, an int >= 0, a SeedSequence or a Generator (PrivpostError otherwise)."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise PrivpostError(f"seed: must be None or an integer >= 0, got {seed!r}")
    if seed < 0:
        raise PrivpostError(f"seed: must be an integer >= 0, got {seed}")


def _wrap(field_name: str, builder, value):
    try:
        return builder(value)
    except ReleaseError as exc:
        if exc.field.startswith(field_name):
            raise
        raise ReleaseError(f"{field_name}.{exc.field}", exc.problem) from None
    except (PrivpostError, ValueError, TypeError, KeyError) as exc:
        msg = str(exc).strip("'\"") or type(exc).__name__
        if isinstance(exc, KeyError):
            msg = f"missing field {msg}"
        raise ReleaseError(field_name, msg) from None


def _check_privacy(stored: Any, computed, field_name: str = "privacy") -> None:
    """The stored guarantee must equal the recomputed one (floats within a relative 1e-6)."""
    if not isinstance(stored, dict):
        raise ReleaseError(field_name, "must be a JSON object")
    want = computed.to_dict()
    unknown = set(stored) - set(want)
    if unknown:
        raise ReleaseError(field_name, f"unexpected field(s) {sorted(unknown)} for a "
                           f"{want['kind']!r} guarantee (recomputed: {want})")
    for key, value in want.items():
        got = stored.get(key)
        if isinstance(value, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
            if not (_finite_number(got) and math.isclose(got, value, rel_tol=1e-6, abs_tol=1e-12)):
                raise ReleaseError(f"{field_name}.{key}",
                                   f"{got} disagrees with the recomputed value ({value})")
        elif got != value:
            raise ReleaseError(f"{field_name}.{key}",
                               f"{got!r} disagrees with the recomputed value ({value!r})")


def release(records, query, mechanism, *, neighbours: str = "replace", seed=None,
            metadata: dict | None = None) -> Release:
    """Release ``query(records)`` privately with ``mechanism`` (the curator's side).

    The mechanism is calibrated to the query's sensitivity in the mechanism's norm under
    ``neighbours`` (replace-one by default), then one noisy value per released coordinate is
    drawn. Records outside the query's declared bounds are clamped, not rejected.

    Parameters
    ----------
    records : array_like, shape (n,) or (n, k)
        Confidential records in the query's column layout (see the query's docstring).
    query : privpost.queries.Query
    mechanism : privpost.mechanisms.Mechanism
        Built from a privacy target (e.g. ``Laplace(epsilon=1.0)``) or a noise scale.
    neighbours : {"replace", "add-remove"}
    seed : None, int or numpy.random.Generator
        ``None`` (the default, and what real releases must use) draws the noise from a
        cryptographically seeded source; an int makes the release reproducible (testing only).
    metadata : dict, optional
        Extra JSON-serialisable information stored in the document.

    Returns
    -------
    Release
    """
    _check_neighbours(neighbours)
    _check_seed(seed)
    if metadata is not None and not isinstance(metadata, dict):
        raise ReleaseError("metadata", "must be a dict")
    recs = query.validate_records(records)
    n = int(recs.shape[0])
    if n < 1:
        raise PrivpostError("records: at least one record is needed")
    meta = {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "privpost_version": _version(), "seeded": seed is not None}
    meta.update(metadata or {})
    if unprotected(query, neighbours, n, meta):   # stated in the document too (inspect --json)
        meta["not_covered"] = list(unprotected(query, neighbours, n, meta))
    if _local(mechanism):
        mech = mechanism.calibrate(None, neighbours=neighbours)   # replace-one only
        observed = mech.sample(recs, seed=seed)
    else:
        if mechanism.discrete and not query.integer:
            raise ReleaseError("mechanism", f"{mechanism.name} adds integer noise, but the query "
                               f"{query.name!r} is not integer-valued")
        sensitivity = query.sensitivity(mechanism.sensitivity_norm, neighbours)
        mech = mechanism.calibrate(sensitivity, neighbours=neighbours)
        observed = mech.sample(query.statistic(recs), seed=seed)
    return Release(query=query, mechanism=mech, n=n, observed=np.asarray(observed, dtype=float),
                   neighbours=neighbours, metadata=meta)


def _version() -> str:
    from privpost import __version__

    return __version__


@dataclass
class ReleaseSet:
    """Several releases about the same confidential data set, with their total privacy cost.

    The total follows the composition rule that applies (:func:`privpost.accounting.compose`):
    pure ε adds; zCDP ρ adds (pure ε counts as ρ = ε²/2); anything with (ε, δ) composes by
    basic composition after converting zCDP at the stated ``delta``.

    ``subsets`` (optional, one name per release) says which records each release was computed
    from: ``"all"`` (the whole data set, size ``n``) or the name of a part of a random partition
    of it (e.g. ``"D1"``, ``"D2"``; seed 002's data split). Releases on the same part compose
    sequentially; different parts are disjoint, so they compose in **parallel** (the maximum
    over parts: pure ε, or ρ when every part is pure/zCDP; otherwise their sum, which is always
    valid); the result composes sequentially with the releases on ``"all"``. Releases on one part
    must share ``n``; the parts' sizes must add up to at most the ``"all"`` releases' ``n``.
    Without ``subsets`` every release is on the whole data set.
    """

    releases: list[Release]
    delta: float = 1e-6
    description: str = ""
    subsets: list[str] | None = None

    def __post_init__(self) -> None:
        from privpost.limits import check_count

        if not self.releases:
            raise PrivpostError("a release set needs at least one release")
        check_count("releases", len(self.releases), "max_releases", "releases (max_releases)")
        d = self.delta
        if isinstance(d, bool) or not isinstance(d, (int, float, np.integer, np.floating)) or \
                not (_finite_number(d) and 0 < float(d) < 1):
            raise ReleaseError("delta", f"must be a number in (0, 1), got {d!r}")
        self.delta = float(d)
        if not isinstance(self.description, str):
            raise ReleaseError("description", f"must be a string, got {self.description!r}")
        rels = self.releases
        if len({r.neighbours for r in rels}) > 1:
            raise ReleaseError("releases", "mix neighbour relations; their costs cannot be added")
        from privpost.releases._cells_check import check_cells_set

        check_cells_set(rels)     # counts with private cell sizes: exactly the checked pair
        if self.subsets is None:
            if len({r.n for r in rels}) > 1:
                raise ReleaseError("releases", "disagree on the public record count n")
            return
        subs = self.subsets
        if not isinstance(subs, (list, tuple)) or len(subs) != len(rels) or \
                not all(isinstance(s, str) and s for s in subs):
            raise ReleaseError("subsets", f"must list one non-empty name per release "
                               f"({len(rels)}), e.g. ['all', 'D1', 'D2']; got {subs!r}")
        self.subsets = list(subs)
        sizes: dict[str, int] = {}
        for i, (s, r) in enumerate(zip(self.subsets, rels)):
            if sizes.setdefault(s, r.n) != r.n:
                raise ReleaseError(f"releases[{i}].n", f"{r.n} differs from the other releases "
                                   f"on subset {s!r} (n = {sizes[s]})")
        parts = {s: m for s, m in sizes.items() if s != "all"}
        if "all" in sizes and sum(parts.values()) > sizes["all"]:
            raise ReleaseError("subsets", f"the parts {sorted(parts)} hold {sum(parts.values())} "
                               f"records, more than the whole data set (n = {sizes['all']})")

    @property
    def not_covered(self) -> tuple[str, ...]:
        """What the set's releases publish exactly that :meth:`total_privacy` does not cover
        (each statement once, prefixed by the release's index)."""
        return tuple(f"release {i}: {text}" for i, r in enumerate(self.releases)
                     for text in r.not_covered)

    def total_privacy(self):
        """The composed guarantee (:class:`privpost.accounting.Privacy`)."""
        from privpost.accounting import Privacy, compose

        if self.subsets is None:
            return compose([r.privacy for r in self.releases], delta=self.delta)
        on_all = [r.privacy for s, r in zip(self.subsets, self.releases) if s == "all"]
        per_part = {}
        for s, r in zip(self.subsets, self.releases):
            if s != "all":
                per_part.setdefault(s, []).append(r.privacy)
        totals = [compose(v, delta=self.delta) for v in per_part.values()]
        if totals:
            kinds = {p.kind for p in totals}
            nb = totals[0].neighbours
            if kinds == {"pure"}:
                on_all.append(Privacy.pure(max(p.epsilon for p in totals), nb))
            elif "approx" not in kinds:
                on_all.append(Privacy.zcdp(max(p.rho if p.kind == "zcdp" else p.epsilon ** 2 / 2
                                               for p in totals), nb))
            else:
                on_all.extend(totals)
        return compose(on_all, delta=self.delta)

    def to_dict(self) -> dict:
        doc = {"schema": SET_SCHEMA, "description": self.description, "delta": self.delta,
               "releases": [r.to_dict() for r in self.releases],
               "total_privacy": self.total_privacy().to_dict()}
        if self.subsets is not None:
            doc["subsets"] = list(self.subsets)
        return doc

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return path

    @classmethod
    def from_dict(cls, doc: Any) -> "ReleaseSet":
        if not isinstance(doc, dict) or doc.get("schema") != SET_SCHEMA:
            raise ReleaseError("schema", f"a release set must have schema {SET_SCHEMA!r}")
        items = doc.get("releases")
        if not isinstance(items, list) or not items:
            raise ReleaseError("releases", "must be a non-empty list of release documents")
        rels = []
        for i, item in enumerate(items):
            try:
                rels.append(Release.from_dict(item))
            except ReleaseError as exc:
                raise ReleaseError(f"releases[{i}].{exc.field}", exc.problem) from None
        unknown = set(doc) - {"schema", "description", "delta", "releases", "total_privacy",
                              "subsets"}
        if unknown:
            raise ReleaseError("document", f"unknown field(s) {sorted(unknown)} in a release set")
        out = cls(rels, delta=doc.get("delta", 1e-6), description=doc.get("description", ""),
                  subsets=doc.get("subsets"))
        if "total_privacy" in doc:
            # the stored total is only a claim: recompute the composition and compare
            _check_privacy(doc["total_privacy"], out.total_privacy(), "total_privacy")
        return out

    @classmethod
    def load(cls, path: str | Path) -> "ReleaseSet":
        return cls.from_dict(_parse_json(_read_text(path)))
