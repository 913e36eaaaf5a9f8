"""Releases made by other libraries: OpenDP, PipelineDP and diffprivlib, as privpost releases.

Each importer takes what the library returns -- the released value(s) and the library's **own
description** of how they were made (OpenDP's measurement and ``summarize_polars_measurement``
table, PipelineDP's ``AggregateParams``, ``<metric>_noise_stddev`` outputs and budget
accountant, a diffprivlib mechanism object) -- and builds a validated
:class:`~privpost.releases.release.Release` through :func:`privpost.releases.declaration.declare`, with the
noise scale **as the library states it**. What the library does not state (the clamping bounds of
an OpenDP sum, which lives inside the opaque measurement; the public record count ``n``) is
given by the caller and then **checked against the library's own privacy statement**: the
guarantee privpost derives from (bounds, neighbours, scale) must reproduce the library's
(OpenDP's privacy map, PipelineDP's per-mechanism ε), else a :class:`~privpost.errors.PrivpostError`
names the field. Anything whose likelihood privpost cannot write exactly is refused: private
partition selection, contribution limits above one, truncated/folded/bounded Laplace variants,
a noise law that is not stated.

Install with ``pip install 'privpost[interop]'``. The libraries are imported only inside these
functions (``import privpost`` loads none of them).

Library to privpost, noise law by noise law (Δ = sensitivity in the mechanism's norm):

=============================================  ===================================================
library statement                              privpost mechanism
=============================================  ===================================================
OpenDP "Float Laplace", scale b                ``Laplace(scale=b)``: ε = Δ₁/b
OpenDP "Integer Laplace", scale t              ``DiscreteLaplace(scale=t)``: pmf ∝ exp(−|k|/t)
OpenDP "Float Gaussian", scale σ               ``Gaussian(scale=σ)``: ρ = Δ₂²/(2σ²)
OpenDP "Integer Gaussian", scale σ             ``DiscreteGaussian(scale=σ)``: pmf ∝ exp(−k²/(2σ²))
PipelineDP LAPLACE, noise stddev s             ``Laplace(scale=s/√2)`` (Laplace sd = √2 b)
PipelineDP GAUSSIAN, noise stddev s, δ         ``Gaussian(scale=s, delta=δ)`` (analytic ε at δ)
diffprivlib ``Laplace(ε, δ, Δ)``               ``Laplace(scale=Δ/(ε − log(1−δ)))`` (its sampler)
diffprivlib ``Gaussian``/``GaussianAnalytic``  ``Gaussian(scale=σ, delta=δ)``, σ² = ``variance(0)``
diffprivlib ``Geometric(ε, Δ)``                ``DiscreteLaplace(scale=Δ/ε)``
diffprivlib ``GaussianDiscrete(ε, δ, Δ)``      ``DiscreteGaussian(scale=σ)``, its ``_scale`` σ
=============================================  ===================================================

OpenDP's float sums state an ε slightly above Δ/b (an allowance for floating-point summation
error); the check accepts a library ε in [privpost ε, privpost ε · (1 + 1e-6)], never one below.
OpenDP (and PipelineDP/Google) sample "float" Laplace and Gaussian noise on a fine lattice
(granularity about 2⁻⁴⁰ of the scale); privpost's continuous density is that law to within that
granularity.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["from_opendp", "from_pipelinedp", "from_diffprivlib"]

_PRIVACY_RTOL = 1e-6


def _need(module: str, extra: str = "interop"):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise PrivpostError(f"{module} is not installed: pip install 'privpost[{extra}]'"
                            ) from None


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise PrivpostError(f"n: the public number of records must be an integer >= 1, got {n!r}")
    return int(n)


def _bounds_of(bounds, name: str) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise PrivpostError(f"bounds[{name!r}]: must be a pair (low, high), got {bounds!r}"
                            ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise PrivpostError(f"bounds[{name!r}]: must be finite with low < high, got {bounds!r}")
    return lo, hi


def _agree(field: str, privpost_value: float, library_value: float, what: str,
           rtol: float = _PRIVACY_RTOL) -> None:
    """The library's stated loss must be the one privpost derives: never below it, above it by at
    most the relative ``rtol`` (the library's own conservative rounding)."""
    lib = float(library_value)
    ours = float(privpost_value)
    if not (ours <= lib * (1 + 1e-12) and lib <= ours * (1 + rtol)):
        raise PrivpostError(
            f"{field}: privpost derives {what} = {ours!r} from the stated noise scale, bounds and "
            f"neighbour relation, but the library states {lib!r}; the bounds (or n, or the "
            "neighbour relation) given do not describe this release, so it cannot be imported "
            "exactly")


# ------------------------------------------------------------------------------------ OpenDP
_OPENDP_LAWS = {
    "Float Laplace": ("laplace", False),
    "Integer Laplace": ("discrete_laplace", True),
    "Float Gaussian": ("gaussian", False),
    "Integer Gaussian": ("discrete_gaussian", True),
}


def _opendp_neighbours(metric_name: str, d_in) -> str:
    if isinstance(d_in, bool) or not isinstance(d_in, (int, np.integer)) or int(d_in) != 1:
        raise PrivpostError(f"d_in: privpost's neighbours differ by one record; an OpenDP privacy "
                            f"unit of d_in = {d_in!r} is not supported (group privacy is not "
                            "a release privpost can write a likelihood for)")
    if metric_name.startswith("SymmetricDistance") or metric_name.startswith("InsertDelete"):
        return "add-remove"
    if metric_name.startswith("ChangeOneDistance") or metric_name.startswith("HammingDistance"):
        return "replace"
    raise PrivpostError(f"measurement.input_metric: {metric_name} is not a record-level neighbour "
                        "relation privpost knows (SymmetricDistance, ChangeOneDistance)")


def from_opendp(measurement, released, *, n: int, bounds: Mapping[str, Sequence[float]] | None
                = None, d_in: int = 1, columns: Sequence[str] | None = None):
    """privpost releases of an OpenDP Polars release (``dp.Context`` → ``query.release()``).

    Parameters
    ----------
    measurement : opendp.mod.Measurement
        The OpenDP Polars measurement of the query (``query.resolve()``); its
        ``summarize_polars_measurement`` table states each column's aggregate, noise
        distribution and scale, its ``input_metric`` the neighbour relation, and
        ``measurement.map(d_in)`` the total privacy loss (checked against privpost's).
    released : polars.DataFrame or polars.LazyFrame or mapping
        The released frame (one row: ``query.release().collect()``), or ``{column: value}``.
    n : int
        The public number of records (OpenDP does not publish it; a noisy ``len`` column is
        refused: privpost treats ``n`` as public).
    bounds : dict, optional
        ``{column: (low, high)}``, the clamping bounds of each ``Sum`` column (they are inside the
        opaque measurement); needed for every sum, and checked through the privacy map.
    d_in : int
        The privacy unit's distance (``dp.unit_of(contributions=1)`` or ``changes=1``: 1).
    columns : list of str, optional
        The columns to import (default: every released column).

    Returns
    -------
    privpost.Release (one column) or privpost.ReleaseSet (several, same ``n``)

    Raises
    ------
    PrivpostError
        An aggregate other than a sum (mean, quantile, len, ...), a noise distribution other than
        the four above, a missing bound, or a privacy loss that privpost cannot reproduce.
    """
    dp = _need("opendp.prelude")
    _need("polars")
    from opendp.accuracy import summarize_polars_measurement

    from privpost import mechanisms as M
    from privpost.releases.declaration import declare
    from privpost.queries import Sum
    from privpost.releases.release import ReleaseSet

    n = _check_n(n)
    if not isinstance(measurement, dp.Measurement):
        raise PrivpostError(f"measurement: must be an OpenDP Measurement (query.resolve()), got "
                            f"{type(measurement).__name__}")
    try:
        summary = summarize_polars_measurement(measurement)
    except Exception as exc:  # noqa: BLE001 - the library's refusal, reported by field
        raise PrivpostError(f"measurement: OpenDP cannot summarize it ({exc}); only Polars "
                            "measurements state their noise per column") from None
    neighbours = _opendp_neighbours(str(measurement.input_metric), d_in)
    measure = str(measurement.output_measure)
    values = _released_row(released)
    rows = summary.to_dicts()
    names = [r["column"] for r in rows]
    wanted = list(columns) if columns is not None else names
    missing = [c for c in wanted if c not in names]
    if missing or not wanted:
        raise PrivpostError(f"columns: {missing or wanted} are not columns of the measurement "
                            f"({names})")
    bounds = dict(bounds or {})
    made = {}
    # every column is imported (even those not returned): the library's privacy map states the
    # total loss of all of them, which is what checks the bounds given
    for row in rows:
        col = row["column"]
        if row["aggregate"] != "Sum":
            raise PrivpostError(f"columns[{col!r}]: aggregate {row['aggregate']!r} is not "
                                "supported (sums of bounded values only; a noisy length or "
                                "count of the frame would make n private, and privpost treats "
                                "n as public)")
        law = _OPENDP_LAWS.get(row["distribution"])
        if law is None:
            raise PrivpostError(f"columns[{col!r}]: noise distribution {row['distribution']!r} "
                                "has no density in privpost")
        if col not in bounds:
            raise PrivpostError(f"bounds[{col!r}]: missing; the clamping bounds of the sum are "
                                "not stated by OpenDP's summary, give them (they are checked "
                                "against the measurement's privacy map)")
        if col not in values:
            raise PrivpostError(f"released: has no column {col!r}")
        lo, hi = _bounds_of(bounds[col], col)
        kind, integer = law
        mech = M.MECHANISMS[kind](scale=float(row["scale"]))
        query = Sum(bounds=(lo, hi), columns=[col], integer=integer)
        made[col] = declare(values[col], query=query, mechanism=mech, n=n, neighbours=neighbours,
                            metadata={"source": "opendp", "opendp_distribution":
                                      row["distribution"], "opendp_scale": float(row["scale"]),
                                      "opendp_output_measure": measure})
    stated = float(measurement.map(int(d_in)))
    every = list(made.values())
    total = ReleaseSet(every).total_privacy() if len(every) > 1 else every[0].privacy
    if measure.startswith("MaxDivergence"):
        _agree("bounds", total.epsilon, stated, "epsilon")
    elif measure.startswith("ZeroConcentratedDivergence"):
        _agree("bounds", total.rho, stated, "rho")
    else:
        raise PrivpostError(f"measurement.output_measure: {measure} is not pure DP or zCDP")
    releases = [made[c] for c in wanted]
    for r in releases:
        r.metadata["opendp_stated_total_loss"] = stated
    return releases[0] if len(releases) == 1 else ReleaseSet(
        releases, description="imported from an OpenDP Polars release")


def _released_row(released) -> dict[str, float]:
    """``{column: value}`` from a one-row polars frame (or a mapping)."""
    if isinstance(released, Mapping):
        return dict(released)
    frame = released.collect() if hasattr(released, "collect") else released
    if not hasattr(frame, "to_dicts"):
        raise PrivpostError(f"released: must be a polars DataFrame or a mapping, got "
                            f"{type(released).__name__}")
    rows = frame.to_dicts()
    if len(rows) != 1:
        raise PrivpostError(f"released: expected one row (a select of aggregates), got "
                            f"{len(rows)} (grouped releases are not supported)")
    return rows[0]


# -------------------------------------------------------------------------------- PipelineDP
def from_pipelinedp(result, params, *, partitions: Sequence, n: int, metric: str = "count",
                    accountant=None):
    """A privpost release of a PipelineDP ``DPEngine.aggregate`` result on public partitions.

    Parameters
    ----------
    result : iterable of (partition_key, MetricsTuple)
        What ``engine.aggregate(...)`` returned (after ``accountant.compute_budgets()``), run
        with ``AggregateParams(output_noise_stddev=True)``: each tuple then states
        ``<metric>_noise_stddev``, the library's own noise standard deviation.
    params : pipeline_dp.AggregateParams
        The aggregation's parameters: noise kind, contribution limits, value bounds.
    partitions : sequence
        The public partitions, in the order of the release's coordinates (private partition
        selection is refused: which partitions appear is then itself random and data-dependent,
        with no likelihood here).
    n : int
        Public number of privacy units (records) in these partitions.
    metric : {"count", "privacy_id_count", "sum"}
        Which metric to import. ``count`` over k ≥ 2 partitions is a histogram; over one
        partition a count, i.e. a sum of 0/1 records; ``sum`` needs a single partition and
        ``min_value``/``max_value``.
    accountant : pipeline_dp.NaiveBudgetAccountant, optional
        The budget accountant; when given, its ε (and δ) for this metric's mechanism must equal
        the one privpost derives from the stated standard deviation.

    Neighbours are add/remove of one privacy unit. Only ``max_partitions_contributed = 1`` and
    ``max_contributions_per_partition = 1`` are accepted: then each unit is one record of
    privpost's query and the L1 (= L2) sensitivity is 1 for counts and max(|min|, |max|) for a
    sum (PipelineDP's ``l1_sensitivity``).

    Returns
    -------
    privpost.Release
    """
    pdp = _need("pipeline_dp")
    from privpost import mechanisms as M
    from privpost.releases.declaration import declare
    from privpost.queries import Histogram, Sum

    n = _check_n(n)
    if not isinstance(params, pdp.AggregateParams):
        raise PrivpostError(f"params: must be pipeline_dp.AggregateParams, got "
                            f"{type(params).__name__}")
    metric = str(metric).lower()
    if metric not in ("count", "privacy_id_count", "sum"):
        raise PrivpostError(f"metric: {metric!r} is not supported (count, privacy_id_count, sum)")
    for name in ("max_partitions_contributed", "max_contributions_per_partition"):
        v = getattr(params, name)
        if v != 1 and not (name == "max_contributions_per_partition" and v is None
                           and params.max_contributions == 1):
            raise PrivpostError(f"params.{name}: {v!r}; only 1 is supported (each privacy "
                                "unit is then one record of the released query)")
    rows = {}
    try:
        items = list(result)
    except TypeError:
        raise PrivpostError(f"result: must be the (partition, MetricsTuple) pairs that "
                            f"DPEngine.aggregate returned, got {type(result).__name__}") from None
    for item in items:
        try:
            key, tup = item
        except (TypeError, ValueError):
            raise PrivpostError("result: must be (partition, MetricsTuple) pairs") from None
        rows[key] = tup
    parts = list(partitions)
    if len(set(map(repr, parts))) != len(parts) or not parts:
        raise PrivpostError("partitions: must be a non-empty list of distinct public partitions")
    if set(map(repr, rows)) != set(map(repr, parts)):
        raise PrivpostError(f"partitions: the result holds partitions {sorted(map(repr, rows))}, "
                            f"not the public ones {sorted(map(repr, parts))} (private partition "
                            "selection is not supported)")
    values, sds = [], []
    for p in parts:
        tup = rows[p]
        try:
            values.append(float(getattr(tup, metric)))
            sds.append(float(getattr(tup, f"{metric}_noise_stddev")))
        except AttributeError:
            raise PrivpostError(f"result: no {metric!r} with its '{metric}_noise_stddev'; run "
                                "the aggregation with AggregateParams(output_noise_stddev=True) "
                                f"and metrics=[Metrics.{metric.upper()}]") from None
    if len(set(sds)) != 1:
        raise PrivpostError(f"result: {metric}_noise_stddev differs between partitions {sds}")
    sd = sds[0]
    kind = params.noise_kind
    delta = None
    if kind == pdp.NoiseKind.LAPLACE:
        mech = M.Laplace(scale=sd / math.sqrt(2.0))
    elif kind == pdp.NoiseKind.GAUSSIAN:
        delta = _pdp_spec(accountant, metric, "delta") if accountant is not None else None
        if delta is None:
            raise PrivpostError("accountant: a Gaussian PipelineDP release states its δ only in "
                                "its budget accountant; pass accountant=")
        mech = M.Gaussian(scale=sd, delta=delta)
    else:
        raise PrivpostError(f"params.noise_kind: {kind} has no density in privpost")
    if metric == "sum":
        if len(parts) != 1:
            raise PrivpostError("partitions: a sum is imported for one partition only (privpost "
                                "has no per-partition sum query)")
        if params.min_value is None or params.max_value is None:
            raise PrivpostError("params.min_value: a sum needs per-contribution bounds "
                                "min_value/max_value (per-partition sum bounds are not "
                                "supported)")
        query = Sum(bounds=(params.min_value, params.max_value))
    elif len(parts) == 1:
        query = Sum(bounds=(0, 1), columns=[f"in_{parts[0]}"])
    else:
        query = Histogram(categories=len(parts), columns=["partition"],
                          levels=[str(p) for p in parts])
    rel = declare(values if len(values) > 1 else values[0], query=query, mechanism=mech, n=n,
                  neighbours="add-remove",
                  metadata={"source": "pipeline_dp", "pipeline_dp_metric": metric,
                            "pipeline_dp_noise_stddev": sd, "pipeline_dp_noise_kind": str(kind)})
    if accountant is not None:
        eps = _pdp_spec(accountant, metric, "eps")
        # Google's Gaussian σ comes from a conservative search (its ε at that σ is up to ~1e-3
        # below the stated one); Laplace b = Δ/ε is exact
        _agree("params", rel.privacy.epsilon, eps, "epsilon",
               rtol=_PRIVACY_RTOL if delta is None else 1e-2)
        rel.metadata["pipeline_dp_epsilon"] = eps
        if delta is not None:
            rel.metadata["pipeline_dp_delta"] = delta
    return rel


def _pdp_spec(accountant, metric: str, what: str) -> float:
    """The accountant's ε or δ of the mechanism for ``metric`` (after ``compute_budgets()``)."""
    name = {"count": "Count", "privacy_id_count": "Privacy_id_count", "sum": "Sum"}[metric]
    specs = [getattr(m, "mechanism_spec", None) for m in getattr(accountant, "_mechanisms", [])]
    specs = [s for s in specs if s is not None and str(getattr(s, "name", "")).lower()
             == name.lower()]
    if len(specs) != 1:
        raise PrivpostError(f"accountant: holds {len(specs)} mechanisms for {metric!r}; pass the "
                            "accountant of this one aggregation (after compute_budgets())")
    try:
        return float(getattr(specs[0], what))
    except (AssertionError, TypeError, ValueError):
        raise PrivpostError("accountant: call accountant.compute_budgets() first") from None


# ------------------------------------------------------------------------------- diffprivlib
def from_diffprivlib(mechanism, value, *, query, n: int, neighbours: str = "replace"):
    """A privpost release of one value randomised by a diffprivlib mechanism object.

    Parameters
    ----------
    mechanism : diffprivlib.mechanisms.DPMechanism
        ``Laplace``, ``Gaussian``, ``GaussianAnalytic``, ``Geometric`` or ``GaussianDiscrete``
        (exactly these classes: the truncated, folded and bounded Laplace variants, the
        staircase, snapping, exponential and other mechanisms have other noise laws and are
        refused). Its ``epsilon``, ``delta``, ``sensitivity`` and ``variance()`` state the noise.
    value : float or array_like, shape (d,)
        ``mechanism.randomise(true_value)`` (one value per coordinate of ``query``).
    query : privpost.queries.Query
        What the randomised value was the statistic of (diffprivlib mechanisms do not know);
        its sensitivity under ``neighbours`` must be at most ``mechanism.sensitivity``.
    n : int
        Public number of records.
    neighbours : {"replace", "add-remove"}

    Returns
    -------
    privpost.Release, with the mechanism calibrated to ``mechanism.sensitivity`` so that its
    ε is the library's (Laplace with δ = 0, Geometric; Gaussian: the analytic ε at the stated δ,
    at most the library's classical ε; GaussianDiscrete: ρ = Δ²/(2σ²)).
    """
    mechs = _need("diffprivlib.mechanisms")
    from privpost import mechanisms as M
    from privpost.queries import Query
    from privpost.releases.release import Release

    n = _check_n(n)
    if not isinstance(query, Query):
        raise PrivpostError(f"query: must be a privpost.queries.Query, got "
                            f"{type(query).__name__}")
    cls = type(mechanism)
    eps = float(getattr(mechanism, "epsilon", float("nan")))
    delta = float(getattr(mechanism, "delta", 0.0) or 0.0)
    sens = getattr(mechanism, "sensitivity", None)
    if sens is None:
        raise PrivpostError("mechanism.sensitivity: not stated")
    sens = float(sens)
    stated: dict[str, Any] = {"diffprivlib_mechanism": cls.__name__,
                              "diffprivlib_epsilon": eps, "diffprivlib_delta": delta,
                              "diffprivlib_sensitivity": sens}
    if cls is mechs.Laplace:
        scale = sens / (eps - math.log1p(-delta))     # its randomise(): b = Δ/(ε − log(1 − δ))
        if not math.isclose(2 * scale * scale, float(mechanism.variance(0)), rel_tol=1e-12):
            raise PrivpostError("mechanism: its variance() disagrees with its Laplace scale")
        mech = M.Laplace(scale=scale)
    elif cls in (mechs.Gaussian, mechs.GaussianAnalytic):
        scale = math.sqrt(float(mechanism.variance(0)))
        mech = M.Gaussian(scale=scale, delta=delta)
    elif cls is mechs.Geometric:
        scale = sens / eps
        mech = M.DiscreteLaplace(scale=scale)
    elif cls is mechs.GaussianDiscrete:
        scale = float(mechanism._scale)              # σ of pmf ∝ exp(−k²/(2σ²)), its sampler's
        mech = M.DiscreteGaussian(scale=scale)
    else:
        raise PrivpostError(f"mechanism: diffprivlib's {cls.__name__} has no noise density in "
                            "privpost (supported: Laplace, Gaussian, GaussianAnalytic, Geometric, "
                            "GaussianDiscrete)")
    needed = query.sensitivity(mech.sensitivity_norm, neighbours)
    if sens < needed:
        raise PrivpostError(f"mechanism.sensitivity: {sens:g} is below the query's "
                            f"{mech.sensitivity_norm.upper()} sensitivity {needed:g} under "
                            f"{neighbours} neighbours: the stated guarantee would not hold")
    if mech.discrete and not query.integer:
        raise PrivpostError(f"query: {cls.__name__} adds integer noise, but {query.name!r} is "
                            "not integer-valued")
    try:
        values = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise PrivpostError(f"value: must be numbers, got {value!r}") from None
    import datetime as _dt

    from privpost import __version__

    meta = {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "privpost_version": __version__, "declared": True, "source": "diffprivlib", **stated}
    rel = Release(query=query, mechanism=mech.calibrate(sens, neighbours=neighbours), n=n,
                  observed=values, neighbours=neighbours, metadata=meta)
    if cls in (mechs.Laplace, mechs.Geometric) and delta == 0.0:
        _agree("mechanism", rel.privacy.epsilon, eps, "epsilon")
    elif cls in (mechs.Gaussian, mechs.GaussianAnalytic):
        if rel.privacy.epsilon > eps * (1 + 1e-9):
            raise PrivpostError(f"mechanism: privpost derives ε = {rel.privacy.epsilon!r} at "
                                f"δ = {delta!r}, above the stated {eps!r}")
    return rel
