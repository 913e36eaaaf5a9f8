"""Resource limits on what an (untrusted) release document or a call may ask privpost to allocate.

A release document is input from someone else: a histogram with ``"categories": 2**40`` or an
``"n"`` of 2**63 would otherwise make privpost build 10^12 labels or ``damcmc`` allocate 2**63
latent records. Every size a document implies is checked against these limits **before**
anything is allocated, and refused with a :class:`~privpost.errors.PrivpostError` that names the
field, the value and the limit (and this module, where the limit can be raised).

=======================  ==================  ===================================================
limit                    default             what it bounds
=======================  ==================  ===================================================
``max_dim``              1,000,000           released coordinates of one query (histogram
                                             categories, naive-Bayes cells, regression /
                                             moment entries, composition parts)
``max_n``                1,000,000,000       the public record count ``n`` of a release
``max_latent``           50,000,000          ``n × record size`` of the latent records a
                                             data-augmentation sampler (``damcmc``) keeps
``max_draws``            100,000,000         ``chains × draws × parameter entries`` stored in a
                                             posterior
``max_document_bytes``   256 MiB             size of a release / release-set JSON file
``max_releases``         10,000              releases in one release set
``max_metadata_depth``   32                  nesting depth of a document's ``metadata``
``max_columns``          10,000              columns of a CSV file of records (its header)
``max_cell_chars``       1,000               characters of one CSV cell or column name
``parameter_range``      (1e-150, 1e150)     every privacy parameter (ε, δ excepted, ρ), noise
                                             scale and sensitivity, given or derived: keeps the
                                             exact rational rounding of :mod:`privpost.mechanisms`
                                             and of composition in range (no overflow, no
                                             subnormal loss of precision)
``max_observed_scales``  1e12                ``|observed| / scale`` of a Gaussian-family
                                             (``l2`` kernel) release given to ``infer``
                                             (:func:`check_observed`)
=======================  ==================  ===================================================

Change a limit for the whole process with :func:`set_limits` (e.g.
``privpost.limits.set_limits(max_dim=10_000_000)``) or temporarily with the context manager
:func:`limits`. With the defaults, a document can make privpost allocate at most a few hundred
MB (``max_latent`` float64 values are 400 MB); ``damcmc`` on n = 10^4 records of a 1,000-cell
histogram (about 2·10^7 latent values: records, their contributions and one sweep of proposals)
fits, n = 10^5 of them does not.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, fields, replace
from typing import Iterator

from privpost.errors import PrivpostError

__all__ = ["Limits", "get_limits", "set_limits", "limits", "check_dim", "check_n", "check_inference",
           "check_latent", "check_draws", "check_parameter", "check_count", "check_observed"]


@dataclass(frozen=True)
class Limits:
    """The configurable limits (see the module docstring for what each bounds)."""

    max_dim: int = 1_000_000
    max_n: int = 1_000_000_000
    max_latent: int = 50_000_000
    max_draws: int = 100_000_000
    max_document_bytes: int = 256 * 1024 * 1024
    max_releases: int = 10_000
    max_metadata_depth: int = 32
    max_columns: int = 10_000
    max_cell_chars: int = 1_000
    parameter_range: tuple[float, float] = (1e-150, 1e150)
    max_observed_scales: float = 1e12


_current = Limits()


def get_limits() -> Limits:
    """The limits in force."""
    return _current


def set_limits(**changes) -> Limits:
    """Change limits for the whole process (unknown names are an error); returns the old ones."""
    global _current
    known = {f.name for f in fields(Limits)}
    unknown = set(changes) - known
    if unknown:
        raise PrivpostError(f"limits: unknown limit(s) {sorted(unknown)}; known: {sorted(known)}")
    old = _current
    _current = replace(_current, **changes)
    return old


@contextlib.contextmanager
def limits(**changes) -> Iterator[Limits]:
    """Temporarily change limits: ``with privpost.limits.limits(max_dim=10**7): ...``."""
    global _current
    old = set_limits(**changes)
    try:
        yield _current
    finally:
        _current = old


def _refuse(field: str, value, limit, what: str):
    from privpost.errors import ReleaseError

    raise ReleaseError(field, f"{value} exceeds the limit of {limit} {what} (a resource limit: "
                       "raise it with privpost.limits.set_limits if this is intended)")


def check_count(field: str, value: int, limit_name: str, what: str) -> int:
    """``value`` (an int) must not exceed the limit ``limit_name``; returns it."""
    limit = getattr(_current, limit_name)
    if value > limit:
        _refuse(field, value, limit, what)
    return value


def check_dim(field: str, dim: int) -> int:
    """A query's number of released coordinates (checked before labels are built)."""
    return check_count(field, dim, "max_dim", "released coordinates (max_dim)")


def check_n(field: str, n: int) -> int:
    """A public record count."""
    return check_count(field, n, "max_n", "records (max_n)")


def check_latent(field: str, n: int, record_size: int) -> None:
    """``n × record_size`` latent values kept by a data-augmentation sampler."""
    check_count(field, int(n) * int(record_size), "max_latent",
                f"latent values (n = {n} records × {record_size} per record; max_latent)")


def check_draws(field: str, chains: int, draws: int, entries: int) -> None:
    """``chains × draws × entries`` stored posterior values."""
    check_count(field, int(chains) * int(draws) * int(entries), "max_draws",
                f"stored posterior values ({chains} chains × {draws} draws × {entries} "
                "parameter entries; max_draws)")


def check_parameter(name: str, value: float) -> float:
    """A positive privacy parameter, scale or sensitivity must lie in ``parameter_range``."""
    lo, hi = _current.parameter_range
    if not (math.isfinite(value) and lo <= value <= hi):
        raise PrivpostError(f"{name} = {value!r} is outside the supported range [{lo:g}, {hi:g}] "
                            "(privacy parameters, noise scales and sensitivities must be finite "
                            "and of moderate magnitude; see privpost.limits)")
    return value


def check_observed(release) -> None:
    """Every Gaussian-family (``l2`` kernel: Gaussian, discrete Gaussian) release of ``release``
    (a release or a release set) must have ``|observed[m]| <= max_observed_scales * scale[m]``.

    Why: the samplers evaluate the noise log-ratio of a move that changes coordinate ``m`` of
    the statistic by ``d`` as ``-w d (d - 2 r)`` with ``r = s - a`` the residual and ``w = 1 /
    (2 scale^2)`` (:mod:`privpost.inference._kernels`); ``r`` is exact to ``ulp(s) ~ 2^-52 |s|``,
    so the ratio is exact to about ``2^-52 |s| |d| / scale^2``, i.e. ``2.2e-4 |d| / scale`` at
    the default limit -- a bias of acceptance probabilities far below what a chain can resolve.
    Beyond it (``s ~ 1e300``: ``r`` no longer carries the statistic at all, and ``r^2``
    overflows) no float64 evaluation is exact, so the release is refused, naming the
    coordinate. Laplace-family (``l1``) releases are exact at any finite value (the change
    ``|r - d| - |r|`` is ``-d`` or ``d`` when ``r`` and ``r - d`` have one sign) and are not
    limited. An honest Gaussian release is this far from 0 only when its statistic is: e.g. a
    sum of ``n = 10^9`` values clamped to ``[0, B]`` released at ``epsilon <= 10^3``
    (``scale >= B / epsilon``) is within ``10^12`` scales."""
    limit = _current.max_observed_scales
    releases = getattr(release, "releases", None) or [release]
    for rel in releases:
        mech = getattr(rel, "mechanism", None)
        obs = getattr(rel, "observed", None)
        if mech is None or obs is None or getattr(mech, "kernel", None) != "l2":
            continue
        scale = getattr(mech, "scale", None)
        if scale is None:
            continue
        import numpy as np

        obs = np.asarray(obs, dtype=float).ravel()
        sc = np.broadcast_to(np.asarray(scale, dtype=float), obs.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            bad = np.flatnonzero(~(np.abs(obs) <= limit * sc))
        if bad.size:
            m = int(bad[0])
            from privpost.errors import ReleaseError

            raise ReleaseError(
                f"observed[{m}]", f"{obs[m]:.6g} is {abs(obs[m]) / sc[m]:.3g} noise scales "
                f"(scale {sc[m]:.6g}) from 0, beyond the limit of {limit:g} "
                "(max_observed_scales): the Gaussian noise log-ratio cannot be evaluated "
                "exactly in float64 there (raise it with privpost.limits.set_limits if "
                "intended)")


def _int_or_none(value):
    if isinstance(value, bool):
        return None
    try:
        import numpy as np

        if isinstance(value, (int, np.integer)):
            return int(value)
    except ImportError:  # pragma: no cover
        pass
    return None


def check_inference(model, release, method: str, options: dict, records: bool = True) -> None:
    """Before a sampler allocates anything: the stored posterior (``chains × draws × parameter
    entries``) must fit ``max_draws`` and, for data augmentation (``damcmc``) on the records
    (``records``; not on a count table, whose size is checked where it is built), the latent
    records (``n × (record columns + released coordinates)``: each record and its contribution
    to the statistic) must fit ``max_latent``. Options of the wrong type are left to the
    method's own validation."""
    import math as _m

    shapes = getattr(model, "param_shapes", None) or {}
    try:
        entries = sum(int(_m.prod(s)) for s in shapes.values())
    except TypeError:
        entries = 0
    draws = _int_or_none(options.get("draws", 1000))
    chains = _int_or_none(options.get("chains", 4))
    if entries and draws is not None and chains is not None and draws > 0 and chains > 0:
        check_draws("draws", chains, draws, entries)
    releases = getattr(release, "releases", None) or [release]
    if method == "damcmc" and records:
        for rel in releases:
            n = getattr(rel, "n", None)
            query = getattr(rel, "query", None)
            if n is None or query is None:
                continue
            sweeps = _int_or_none(options.get("sweeps_per_iteration", 1)) or 1
            # per record: its columns and its contribution t (dim), current and proposed
            width = (len(getattr(query, "columns", ())) + int(getattr(query, "dim", 0))) \
                * (1 + max(sweeps, 1))
            check_latent("n", int(n), max(width, 1))
