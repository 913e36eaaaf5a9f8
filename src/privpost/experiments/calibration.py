"""Simulation-based calibration of inference methods for private releases.

:func:`calibrate` runs, for every cell ``(n, epsilon)`` of a grid and every replicate ``r``:

1. ``theta_r`` from the model's prior (or fixed ``params=``, as in the coverage tables of seed 000),
2. ``n`` confidential records from the model given ``theta_r``,
3. a private release of the query with the mechanism at that ``epsilon``,
4. every method on the **same** release (so methods are compared on identical data),

and records, per method and scalar parameter entry:

* ``pit``: the probability integral transform of the truth, the fraction of posterior draws below
  it (ties count one half); ``rank``: the number of draws below it. Under a calibrated method and
  parameters drawn from the prior, ``pit`` is Uniform(0, 1) across replicates (Cook, Gelman &
  Rubin 2006; Talts et al. 2018; seed 003 §4.4.2). The summary reports the Kolmogorov-Smirnov
  distance ``sup_u |ECDF(u) - u|`` and its p-value.
* for each credible ``level``: the equal-tailed central interval, whether it covers the truth,
  and its width (coverage is the seed 000 tables' statistic).
* ``mmd2``: the unbiased squared maximum mean discrepancy (Gretton et al. 2012, the estimator of
  seed 003 §4.4.2) between the method's draws and the non-private posterior's draws of the same
  replicate, per scalar entry. **Kernel:** Gaussian, ``k(a, b) = exp(-(a - b)^2 / (2 h^2))``.
  **Bandwidth rule:** ``h = mmd_bandwidth``; the default ``1.0`` is seed 003's unit-bandwidth
  ("standard normal") kernel; ``"median"`` uses the median heuristic (median pairwise distance of
  the pooled subsample). Both samples are thinned evenly to the same size ``m = mmd_draws``.
  The estimator is unbiased, so it can be slightly negative.
* point errors (``abs_error`` of the posterior mean; ``mean_abs_error``, the expected L1 error of
  a single posterior draw, seed 004 Fig. 2), posterior mean and sd, bulk ESS, run time and, for
  samplers that report it, record acceptance (mean and minimum per sweep, seed 000 Fig. 1b).

Output is a tidy :class:`pandas.DataFrame`, one row per replicate x method x parameter entry x
level (written as CSV and Parquet), a summary table and PNG figures (ECDF of the PIT with a 95%
uniform band, PIT histograms, coverage against epsilon, KS distance against n).

Reproducibility. Replicate ``r`` draws everything from streams derived from ``(seed, r)`` with
:class:`numpy.random.SeedSequence` spawn keys: ``(r, 0)`` the parameters, ``(r, 1)`` the records,
``(r, 2)`` the release noise, ``(r, 3, crc32(method label))`` each method. Nothing depends on the
execution backend, on the number of workers or on the order in which replicates finish, so the
local pool, a serial run and a Dask cluster give identical tables (all columns but ``seconds``).
The streams do not depend on ``n`` or ``epsilon``: cells of the grid share ``theta_r`` and the
standardised noise draws (common random numbers), which makes comparisons across the grid less
noisy without biasing any cell.

Resumability. With ``outdir``, each finished replicate is written to
``outdir/replicates/<hash>-r<r>.parquet`` where ``<hash>`` digests every setting of its cell
(model, query, mechanism, n, epsilon, fixed parameters, methods and their options, levels, MMD
settings, seed). A re-run skips the replicates whose file exists, so an interrupted study resumes
where it stopped; changing any setting changes the hash and recomputes.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from privpost.errors import PrivpostError
from privpost.experiments.uniformity import ks_distance

__all__ = ["calibrate", "CalibrationResult", "MethodSpec", "MissingMethodError", "summarize",
           "run_replicate", "mmd2_unbiased", "pit", "ks_distance", "DEFAULT_METHOD_OPTIONS"]

FORMAT_VERSION = 1
#: Options given to every method that accepts them (per-method options override these).
#: ``progress=False`` and ``cores=1`` keep samplers quiet and single-process inside a replicate
#: (the replicates themselves are what runs in parallel).
DEFAULT_METHOD_OPTIONS: dict[str, Any] = {"draws": 1000, "warmup": 1000, "chains": 1,
                                          "progress": False, "cores": 1}


class MissingMethodError(PrivpostError):
    """A method named in a study is not implemented (its module cannot be imported)."""


# ============================================================================ methods
@dataclass(frozen=True)
class MethodSpec:
    """One method of a study: a ``label`` (table key), the method and its options.

    ``method`` is a registered name (:data:`privpost.inference.METHODS`) or a callable
    ``run(model, release, **options) -> Posterior``. ``options`` override
    :data:`DEFAULT_METHOD_OPTIONS`; ``seed`` is always supplied by the study.
    """

    label: str
    method: Any
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ident(self) -> str:
        m = self.method
        if isinstance(m, str):
            return m
        return f"{getattr(m, '__module__', '?')}:{getattr(m, '__qualname__', repr(m))}"


def _method_specs(methods) -> tuple[MethodSpec, ...]:
    if isinstance(methods, (str, MethodSpec)) or callable(methods):
        methods = [methods]
    items: list[MethodSpec] = []
    if isinstance(methods, Mapping):
        for label, value in methods.items():
            if isinstance(value, Mapping):
                value = dict(value)
                method = value.pop("method", label)
                opts = value.pop("options", None)
                items.append(MethodSpec(str(label), method, dict(opts or value)))
            else:
                items.append(MethodSpec(str(label), value, {}))
    else:
        for value in methods:
            if isinstance(value, MethodSpec):
                items.append(value)
            elif isinstance(value, str):
                items.append(MethodSpec(value, value, {}))
            elif callable(value):
                items.append(MethodSpec(getattr(value, "__name__", "method"), value, {}))
            else:
                raise PrivpostError(f"methods: cannot read {value!r} (give names, callables or "
                                    "a dict label -> name/options)")
    if not items:
        raise PrivpostError("methods: give at least one method")
    labels = [m.label for m in items]
    if len(set(labels)) != len(labels):
        raise PrivpostError(f"methods: labels must be unique, got {labels}")
    for m in items:
        if "seed" in m.options:
            raise PrivpostError(f"method {m.label!r}: do not pass 'seed' in the options; the "
                                "study derives one stream per replicate and method")
    return tuple(items)


def resolve_method(method) -> Callable:
    """The ``run`` function of ``method`` (a registered name or a callable).

    Raises :class:`MissingMethodError` naming the method when its module does not exist yet or
    fails to import, and :class:`~privpost.errors.IncompatibleError` for unknown names.
    """
    if callable(method):
        return method
    from privpost.inference import METHODS, get_method

    try:
        return get_method(method)
    except (ImportError, AttributeError) as exc:
        target = METHODS.get(method, "?").split(":")[0]
        raise MissingMethodError(
            f"method {method!r} is not available: its module {target} cannot be imported "
            f"({type(exc).__name__}: {exc})") from None


def _accepts(fn: Callable, name: str, *, explicit: bool = False) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return not explicit
    if name in params:
        return True
    return (not explicit) and any(p.kind is p.VAR_KEYWORD for p in params.values())


def _options_for(fn: Callable, spec: MethodSpec, common: Mapping[str, Any]) -> dict:
    """Options for one method.

    :data:`DEFAULT_METHOD_OPTIONS` go only to methods that name them in their signature; the
    study's ``method_options`` go to methods that name them or take ``**options``; the method's
    own options are passed as given (so a typo fails loudly in the method). ``draws`` is never
    given to ``"ops"`` from the defaults or common options: there it is the number of released
    samples, each costing ``epsilon / draws``.
    """
    opts = {k: v for k, v in DEFAULT_METHOD_OPTIONS.items() if _accepts(fn, k, explicit=True)}
    opts.update({k: v for k, v in common.items() if _accepts(fn, k)})
    if spec.ident in _BUDGET_SPLITTING:
        # OPS's ``draws`` is the number of *released* samples, each costing eps/draws: a
        # privacy setting, so only the method's own options may set it (default: one sample).
        opts.pop("draws", None)
    opts.update(spec.options)
    return opts


_BUDGET_SPLITTING = {"ops"}


# ============================================================================ statistics
def pit(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Fraction of ``draws`` (S, E) below ``truth`` (E,), ties counted one half -> (E,)."""
    below = (draws < truth).mean(axis=0)
    ties = (draws == truth).mean(axis=0)
    return below + 0.5 * ties


def _thin(x: np.ndarray, m: int) -> np.ndarray:
    if x.shape[0] <= m:
        return x
    idx = np.linspace(0, x.shape[0] - 1, m).round().astype(np.int64)
    return x[idx]


def mmd2_unbiased(x, y, bandwidth: float | str = 1.0, m: int | None = 500) -> float:
    """Unbiased squared MMD between samples ``x`` and ``y`` with a Gaussian kernel.

    ``x, y``: shape ``(S,)`` or ``(S, d)``. Both are thinned evenly to the same size (at most
    ``m``), then ``MMD^2 = 1/(m(m-1)) sum_{i != j} [k(x_i,x_j) + k(y_i,y_j) - k(x_i,y_j) -
    k(x_j,y_i)]`` with ``k(a, b) = exp(-||a - b||^2 / (2 h^2))``; ``h = bandwidth`` or, for
    ``"median"``, the median pairwise distance of the pooled thinned samples.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    x = x.reshape(x.shape[0], -1)
    y = y.reshape(y.shape[0], -1)
    size = min(x.shape[0], y.shape[0], m or max(x.shape[0], y.shape[0]))
    if size < 2:
        return float("nan")
    x, y = _thin(x, size), _thin(y, size)
    z = np.concatenate([x, y])
    if z.shape[1] == 1:
        diff = z[:, 0][:, None] - z[:, 0][None, :]
        sq = diff * diff
    else:
        sq = np.sum((z[:, None, :] - z[None, :, :]) ** 2, axis=-1)
    if isinstance(bandwidth, str):
        if bandwidth != "median":
            raise PrivpostError(f"mmd_bandwidth must be a number or 'median', got {bandwidth!r}")
        iu = np.triu_indices(2 * size, 1)
        h = float(np.sqrt(np.median(sq[iu])))
        if not h > 0:
            h = 1.0
    else:
        h = float(bandwidth)
        if not h > 0:
            raise PrivpostError(f"mmd_bandwidth must be > 0, got {bandwidth!r}")
    k = np.exp(sq * (-0.5 / (h * h)))
    kxx, kyy, kxy = k[:size, :size], k[size:, size:], k[:size, size:]
    off = size * (size - 1)
    total = (kxx.sum() - np.trace(kxx)) + (kyy.sum() - np.trace(kyy)) \
        - 2.0 * (kxy.sum() - np.trace(kxy))
    return float(total / off)


def _ess_bulk(arr: np.ndarray) -> float:
    """Bulk ESS of one scalar's draws ``(chains, draws)`` (Vehtari et al. 2021, as
    ``arviz.ess(method="bulk")``): :func:`privpost.diagnostics.ess_bulk`, which needs no ArviZ in
    the worker processes; NaN for fewer than 4 draws or constant draws."""
    from privpost.diagnostics import ess_bulk

    arr = np.asarray(arr, dtype=float)
    if arr.shape[1] < 4 or np.all(arr == arr.flat[0]):
        return float("nan")
    return ess_bulk(arr)


# ============================================================================ one replicate
@dataclass(frozen=True)
class _Task:
    index: int
    key: str
    n: int
    epsilon: float
    replicate: int
    seed: int
    model: Any
    query: Any
    mechanism: dict
    neighbours: str
    params: dict | None
    methods: tuple
    common: dict
    levels: tuple
    parameters: tuple | None
    mmd_reference: str | None
    mmd_draws: int
    mmd_bandwidth: Any
    diagnostics: bool


def _stream(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(int(k) for k in key)))


def _label_key(label: str) -> int:
    return zlib.crc32(label.encode("utf-8"))


def _entry_labels(name: str, shape: tuple) -> list[tuple[str, str]]:
    if not shape:
        return [("", name)]
    out = []
    for idx in np.ndindex(*shape):
        s = ", ".join(str(i) for i in idx)
        out.append((s, f"{name}[{s}]"))
    return out


def _truth(task: _Task, model) -> tuple[dict, dict[str, np.ndarray]]:
    """(parameters for ``simulate``, the model parameters as float arrays of their shapes)."""
    if task.params is not None:
        raw = {k: np.array(v, dtype=float) for k, v in task.params.items()}
    else:
        raw = model.prior_sample(_stream(task.seed, task.replicate, 0))
    out = {}
    for name, shape in model.param_shapes.items():
        if name in raw:
            out[name] = np.asarray(raw[name], dtype=float).reshape(tuple(shape))
    return raw, out


def _is_interrupted(post) -> bool:
    return any(str(note).lower().startswith("interrupted") for note in getattr(post, "notes", []))


def run_replicate(task: _Task):
    """Run one replicate of one cell: simulate, release, run every method; tidy rows.

    Deterministic given the task (its ``seed`` and ``replicate``). Returns a DataFrame.
    """
    from privpost.mechanisms import mechanism_from_dict
    from privpost.releases.release import release as make_release

    model = task.model
    raw, truth = _truth(task, model)
    records = model.simulate(raw, task.n, _stream(task.seed, task.replicate, 1))
    mech = mechanism_from_dict(dict(task.mechanism))
    rel = make_release(records, query=task.query, mechanism=mech, neighbours=task.neighbours,
                       seed=_stream(task.seed, task.replicate, 2))
    names = [nm for nm in (task.parameters or tuple(truth)) if nm in truth]
    if task.parameters:
        missing = [nm for nm in task.parameters if nm not in truth]
        if missing:
            raise PrivpostError(f"parameters {missing} are not parameters of model "
                                f"{getattr(model, 'name', model)!r} ({list(model.param_shapes)})")
    posts, seconds = {}, {}
    for spec in task.methods:
        fn = resolve_method(spec.method)
        opts = _options_for(fn, spec, task.common)
        if _accepts(fn, "records", explicit=True):
            opts.setdefault("records", records)
        rng = _stream(task.seed, task.replicate, 3, _label_key(spec.label))
        t0 = time.perf_counter()
        post = fn(model, rel, seed=rng, **opts)
        seconds[spec.label] = time.perf_counter() - t0
        if _is_interrupted(post):
            raise KeyboardInterrupt(f"method {spec.label!r} was interrupted")
        for nm in names:
            if nm not in post.draws:
                raise PrivpostError(f"method {spec.label!r} returned no draws of {nm!r} "
                                    f"(it returned {list(post.draws)})")
        posts[spec.label] = post
    ref = posts.get(task.mmd_reference) if task.mmd_reference else None

    cols: dict[str, list] = {c: [] for c in _COLUMNS}
    for spec in task.methods:
        post = posts[spec.label]
        acc_mean, acc_min = _acceptance(post)
        for nm in names:
            arr = np.asarray(post.draws[nm], dtype=float)          # (chains, draws, *shape)
            shape = arr.shape[2:]
            flat = arr.reshape(arr.shape[0] * arr.shape[1], -1)    # (S, E)
            t = truth[nm].reshape(-1)
            u = pit(flat, t)
            rank = (flat < t).sum(axis=0)
            mean = flat.mean(axis=0)
            sd = flat.std(axis=0, ddof=1) if flat.shape[0] > 1 else np.full(t.shape, np.nan)
            mae = np.abs(flat - t).mean(axis=0)
            qs = {lv: np.quantile(flat, [(1 - lv) / 2, (1 + lv) / 2], axis=0) for lv in task.levels}
            if ref is not None and spec.label == task.mmd_reference:
                mmd = [0.0] * flat.shape[1]        # the reference against itself
            elif ref is not None:
                rflat = np.asarray(ref.draws[nm], dtype=float).reshape(-1, flat.shape[1])
                mmd = [mmd2_unbiased(flat[:, e], rflat[:, e], task.mmd_bandwidth, task.mmd_draws)
                       for e in range(flat.shape[1])]
            else:
                mmd = [float("nan")] * flat.shape[1]
            for e, (index, label) in enumerate(_entry_labels(nm, shape)):
                ess = (_ess_bulk(arr.reshape(arr.shape[0], arr.shape[1], -1)[:, :, e])
                       if task.diagnostics else float("nan"))
                for lv in task.levels:
                    lo, hi = qs[lv][0, e], qs[lv][1, e]
                    row = {
                        "setting": task.key, "n": task.n, "epsilon": task.epsilon,
                        "replicate": task.replicate, "method": spec.label,
                        "method_name": spec.ident, "exact": bool(post.exact),
                        "parameter": nm, "index": index, "entry": label,
                        "truth": float(t[e]), "level": float(lv),
                        "lower": float(lo), "upper": float(hi),
                        "covered": bool(lo <= t[e] <= hi), "width": float(hi - lo),
                        "pit": float(u[e]), "rank": int(rank[e]), "draws": int(flat.shape[0]),
                        "mean": float(mean[e]), "sd": float(sd[e]),
                        "abs_error": float(abs(mean[e] - t[e])),
                        "mean_abs_error": float(mae[e]), "mmd2": float(mmd[e]),
                        "ess_bulk": ess, "accept_mean": acc_mean, "accept_min": acc_min,
                        "seconds": float(seconds[spec.label]),
                    }
                    for c in _COLUMNS:
                        cols[c].append(row[c])
    return _frame(cols)


def _frame(cols: dict):
    import pandas as pd

    return pd.DataFrame({c: (pd.array(cols[c], dtype="str") if d == "str"
                             else np.asarray(cols[c], dtype=d)) for c, d in _DTYPES.items()})


_DTYPES = {
    "setting": "str", "n": "int64", "epsilon": "float64", "replicate": "int64", "method": "str",
    "method_name": "str", "exact": "bool", "parameter": "str", "index": "str", "entry": "str",
    "truth": "float64", "level": "float64", "lower": "float64", "upper": "float64",
    "covered": "bool", "width": "float64", "pit": "float64", "rank": "int64", "draws": "int64",
    "mean": "float64", "sd": "float64", "abs_error": "float64", "mean_abs_error": "float64",
    "mmd2": "float64", "ess_bulk": "float64", "accept_mean": "float64", "accept_min": "float64",
    "seconds": "float64",
}
_COLUMNS = list(_DTYPES)


def _acceptance(post) -> tuple[float, float]:
    """Mean record acceptance and the minimum per-sweep acceptance, if the sampler reports them."""
    stats = getattr(post, "sample_stats", {}) or {}
    chain = getattr(post, "chain_stats", {}) or {}
    mean = float(np.mean(stats["accept_rate"])) if "accept_rate" in stats else float("nan")
    if "min_sweep_accept" in chain:
        low = float(np.nanmin(chain["min_sweep_accept"]))
    elif "accept_min" in stats:
        low = float(np.nanmin(stats["accept_min"]))
    else:
        low = float("nan")
    return mean, low


# ============================================================================ settings, hashing
def _jsonable(obj):
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if obj is None or isinstance(obj, str):
        return obj
    if hasattr(obj, "to_dict"):
        return _jsonable(obj.to_dict())
    if callable(obj):
        return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"
    return repr(obj)


def _digest(doc) -> str:
    text = json.dumps(_jsonable(doc), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _as_list(value, name: str, cast) -> list:
    if value is None:
        return [None]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        value = [value]
    out = []
    for v in value:
        try:
            out.append(cast(v))
        except (TypeError, ValueError):
            raise PrivpostError(f"{name}: cannot read {v!r}") from None
    if not out:
        raise PrivpostError(f"{name}: give at least one value")
    return out


def _mechanism_at(spec: dict, epsilon: float | None) -> dict:
    """The mechanism spec at a grid epsilon (derived fields dropped; delta kept)."""
    if epsilon is None:
        keep = {k: v for k, v in spec.items() if k not in ("sensitivity", "parameterisation")}
        if keep.get("scale") is not None and any(keep.get(t) is not None
                                                 for t in ("epsilon", "rho")):
            # a calibrated mechanism's dict: rebuild from its privacy target
            keep.pop("scale")
        return keep
    if spec.get("rho") is not None and spec.get("epsilon") is None:
        raise PrivpostError("an epsilon grid needs a mechanism given by epsilon (got rho); "
                            "give e.g. {'type': 'gaussian', 'epsilon': 1, 'delta': 1e-6}")
    out = {"type": spec["type"], "epsilon": float(epsilon)}
    for key in ("delta", "categories"):
        if spec.get(key) is not None:
            out[key] = spec[key]
    return out


def _epsilon_of(mech: dict, query, neighbours: str) -> float:
    """The pure/approximate-DP epsilon the mechanism gives on this query (NaN if none)."""
    from privpost.mechanisms import mechanism_from_dict

    if mech.get("epsilon") is not None:
        return float(mech["epsilon"])
    try:
        m = mechanism_from_dict(dict(mech))
        m = m.calibrate(query.sensitivity(m.sensitivity_norm, neighbours), neighbours=neighbours)
        eps = m.privacy.epsilon
        return float(eps) if eps is not None else float("nan")
    except Exception:  # noqa: BLE001 - a label only; the release itself validates the mechanism
        return float("nan")


def _query_at(query, n: int):
    from privpost.queries import query_from_dict

    d = query.to_dict()
    if "n" in d and d["n"] != n:
        d = dict(d, n=int(n))
        return query_from_dict(d)
    return query


def _coerce_inputs(model, query, mechanism):
    from privpost.models import model_from_spec
    from privpost.queries import Query, query_from_dict

    try:
        mdl = model_from_spec(model)
    except PrivpostError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise PrivpostError(f"model: {exc}") from None
    if isinstance(query, Mapping):
        query = query_from_dict(dict(query))
    elif not isinstance(query, Query):
        raise PrivpostError(f"query must be a privpost Query or its dict, not {type(query).__name__}")
    if isinstance(mechanism, Mapping):
        mspec = dict(mechanism)
    elif hasattr(mechanism, "to_dict"):
        mspec = dict(mechanism.to_dict())
    else:
        raise PrivpostError(f"mechanism must be a privpost Mechanism or its dict, not "
                            f"{type(mechanism).__name__}")
    if "type" not in mspec:
        raise PrivpostError("mechanism: the dict needs a 'type' (laplace, gaussian, ...)")
    return mdl, query, mspec


# ============================================================================ result
@dataclass
class CalibrationResult:
    """The outcome of :func:`calibrate`.

    Attributes
    ----------
    table : pandas.DataFrame
        Tidy table, one row per replicate x method x parameter entry x level (columns described
        in :func:`calibrate`).
    settings : dict
        The study's settings (JSON-able), as written to ``settings.json``.
    outdir : Path or None
    figures : dict[str, Path]
        Written PNG files by kind (``"pit_ecdf"``, ``"pit_hist"``, ``"coverage"``, ``"ks"``).
    computed, reused : int
        Replicates computed by this call and replicates read back from ``outdir``.
    """

    table: Any
    settings: dict
    outdir: Path | None = None
    figures: dict = field(default_factory=dict)
    computed: int = 0
    reused: int = 0

    def summary(self):
        """Per (n, epsilon, method, entry, level): coverage (with its binomial standard error),
        mean width, KS distance of the PIT from uniform and its p-value, mean MMD^2, errors."""
        return summarize(self.table)

    def coverage(self, level: float | None = None, parameter: str | None = None):
        """Coverage pivot: rows (method, n, epsilon), columns entries."""
        t = self.table
        if level is not None:
            t = t[np.isclose(t["level"], level)]
        if parameter is not None:
            t = t[t["parameter"] == parameter]
        return t.pivot_table(index=["method", "n", "epsilon", "level"], columns="entry",
                             values="covered", aggfunc="mean", sort=False)

    def ks(self):
        """KS distance of the PIT from uniform per (method, n, epsilon, entry)."""
        s = self.summary()
        s = s[s["level"] == s["level"].iloc[0]]
        return s.pivot_table(index=["method", "n", "epsilon"], columns="entry",
                             values="ks", sort=False)

    def plot(self, outdir=None, entries: Sequence[str] | None = None) -> dict:
        """Write the PNG figures to ``outdir`` (default: the study's directory)."""
        from privpost.experiments.plots import calibration_figures

        target = Path(outdir) if outdir is not None else self.outdir
        if target is None:
            raise PrivpostError("plot: give an output directory")
        self.figures = calibration_figures(self.table, Path(target), entries=entries)
        return self.figures

    def save(self, outdir=None) -> dict:
        """Write ``calibration.csv``, ``calibration.parquet``, ``summary.csv``, ``settings.json``."""
        target = Path(outdir) if outdir is not None else self.outdir
        if target is None:
            raise PrivpostError("save: give an output directory")
        target.mkdir(parents=True, exist_ok=True)
        paths = {"csv": target / "calibration.csv", "parquet": target / "calibration.parquet",
                 "summary": target / "summary.csv", "settings": target / "settings.json"}
        self.table.to_csv(paths["csv"], index=False)
        self.table.to_parquet(paths["parquet"], index=False)
        self.summary().to_csv(paths["summary"], index=False)
        paths["settings"].write_text(json.dumps(self.settings, indent=2) + "\n")
        return paths

    def __repr__(self) -> str:
        t = self.table
        return (f"CalibrationResult(rows={len(t)}, methods={list(dict.fromkeys(t['method']))}, "
                f"n={sorted(set(t['n']))}, epsilon={sorted(set(t['epsilon']))}, "
                f"replicates={t['replicate'].nunique()}, computed={self.computed}, "
                f"reused={self.reused}, outdir={str(self.outdir) if self.outdir else None})")


def summarize(table):
    """Summary of a calibration table (see :meth:`CalibrationResult.summary`)."""
    import pandas as pd
    from scipy import stats

    keys = ["n", "epsilon", "method", "parameter", "index", "entry", "level"]
    rows = []
    for key, g in table.groupby(keys, sort=False, dropna=False):
        r = len(g)
        cov = float(g["covered"].mean())
        u = g["pit"].to_numpy()
        ks = ks_distance(u)
        pval = float(stats.kstwo.sf(ks, r)) if r > 0 else float("nan")
        rows.append(dict(zip(keys, key)) | {
            "replicates": r, "coverage": cov,
            "coverage_se": math.sqrt(max(cov * (1 - cov), 0.0) / r) if r else float("nan"),
            "width": float(g["width"].mean()), "ks": ks, "ks_pvalue": pval,
            "mmd2": float(g["mmd2"].mean()), "abs_error": float(g["abs_error"].mean()),
            "mean_abs_error": float(g["mean_abs_error"].mean()),
            "ess_bulk_median": float(g["ess_bulk"].median()),
            "accept_mean": float(g["accept_mean"].mean()),
            "accept_min": float(g["accept_min"].min()),
            "seconds": float(g["seconds"].mean()),
        })
    return pd.DataFrame(rows)


# ============================================================================ execution
def _replicate_path(outdir: Path, key: str, r: int) -> Path:
    return outdir / "replicates" / f"{key}-r{r:06d}.parquet"


def _load(path: Path):
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except Exception:  # noqa: BLE001 - a partial or corrupt file is recomputed
        return None
    if list(frame.columns) != _COLUMNS:
        return None
    return frame.astype(_DTYPES)


def _store(path: Path, frame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)


class _Bar:
    def __init__(self, enabled: bool, total: int, done: int, console=None, label="calibration"):
        self.progress = None
        if enabled and total > 0:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     TimeRemainingColumn(),
                                     console=console or Console(stderr=True))
            self.task = self.progress.add_task(label, total=total, completed=done)

    def __enter__(self):
        if self.progress is not None:
            self.progress.start()
        return self

    def advance(self):
        if self.progress is not None:
            self.progress.advance(self.task)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()


def _run_serial(tasks, on_done):
    for task in tasks:
        on_done(task, run_replicate(task))


def _replicate_and_warnings(task: _Task):
    """:func:`run_replicate` in a worker process, with the warnings it raised as
    ``[(category, message)]``: the parent raises them again, so a command prints them once,
    formatted (:mod:`privpost._cli_warnings`), instead of each worker printing them with source
    paths (or, in a forked worker, recording them into a list nobody reads)."""
    import warnings

    from privpost.errors import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        table = run_replicate(task)
    return table, [(w.category, str(w.message)) for w in caught]


def _run_pool(tasks, workers: int, on_done):
    import multiprocessing as mp
    import warnings
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else None)
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    futures = {}
    try:
        futures = {ex.submit(_replicate_and_warnings, t): t for t in tasks}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                table, warned = f.result()        # re-raises a worker's exception
                for category, message in warned:
                    warnings.warn(message, category, stacklevel=1)
                on_done(futures[f], table)
    except BaseException:
        for f in futures:
            f.cancel()
        ex.shutdown(wait=True, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


def _run_dask(tasks, scheduler, on_done, stall_timeout=None, lost_timeout=None):
    """Replicates on a Dask cluster; every wait is bounded (see :mod:`._dask_runner`)."""
    from privpost.experiments._dask_runner import STALL_TIMEOUT, run_dask

    run_dask(tasks, scheduler, on_done, run_replicate,
             stall_timeout=STALL_TIMEOUT if stall_timeout is None else stall_timeout,
             lost_timeout=lost_timeout)


def calibrate(model, query, mechanism, methods: Any = ("nonprivate",), n: Any = 100,
              epsilon: Any = None, *, replicates: int = 100, levels: Sequence[float] = (0.5, 0.9),
              params: Mapping[str, Any] | None = None, parameters: Sequence[str] | None = None,
              method_options: Mapping[str, Any] | None = None,
              mmd_reference: str | None = "auto", mmd_draws: int = 500,
              mmd_bandwidth: float | str = 1.0, diagnostics: bool = True,
              neighbours: str = "replace", seed: int | None = 0, workers: int | None = None,
              scheduler: Any = None, outdir: str | Path | None = None, progress: bool = True,
              figures: bool = True, figure_entries: Sequence[str] | None = None,
              console=None, scheduler_timeout: float | None = None,
              lost_cluster_timeout: float | None = None) -> CalibrationResult:
    """Simulation-based calibration of inference methods on a grid of n and epsilon.

    Parameters
    ----------
    model : privpost.models.Model, spec string or dict
        Prior and record model (the *same* prior the methods use: parameters are drawn from it).
    query : privpost.queries.Query or dict
        The released statistic. A query with a public ``n`` (``Mean``, ``CensoredLogMean``) is
        rebuilt for each ``n`` of the grid.
    mechanism : privpost.mechanisms.Mechanism or dict
        E.g. ``{"type": "laplace", "epsilon": 1}``. With an ``epsilon`` grid, the epsilon is
        replaced by each grid value (``delta`` kept); the mechanism is calibrated to the query's
        sensitivity by :func:`privpost.release`.
    methods : str, callable, list of those, or dict label -> name / {"method": name, **options}
        Methods run on every release. ``"nonprivate"`` receives the confidential ``records=``.
    n : int or list of int
        Record counts.
    epsilon : float, list of float or None
        Privacy grid (``None``: the mechanism as given, one cell).
    replicates : int
        Replicates per cell (independent draws of parameters, data and noise).
    levels : sequence of float
        Central credible levels whose equal-tailed intervals are checked.
    params : dict, optional
        Fixed true parameters for every replicate (coverage studies, seed 000 Tables). ``None``:
        drawn from the prior (calibration in the SBC sense).
    parameters : list of str, optional
        Parameter names to report (default: all of ``model.param_shapes``).
    method_options : dict, optional
        Options for every method that accepts them (names them, or takes ``**options``). They
        override :data:`DEFAULT_METHOD_OPTIONS` (``draws=1000, warmup=1000, chains=1,
        progress=False, cores=1``, given only to methods whose signature names them).
        Per-method options (the dict form of ``methods``) take precedence and are passed as given.
    mmd_reference : str or None
        Label of the reference method for MMD; ``"auto"`` = ``"nonprivate"`` when it is among
        the methods, else no MMD.
    mmd_draws, mmd_bandwidth
        Subsample size and Gaussian-kernel bandwidth (a number, default 1 as in seed 003, or
        ``"median"``) of :func:`mmd2_unbiased`.
    diagnostics : bool
        Compute the bulk ESS per entry (ArviZ).
    neighbours : {"replace", "add-remove"}
    seed : int
        Root seed; replicate ``r`` uses streams derived from ``(seed, r)`` only. ``None`` picks a
        random seed and records it in ``settings["seed"]``.
    workers : int, optional
        Local worker processes (default: the number of CPUs). ``1`` runs in this process.
    scheduler : str or distributed.Client, optional
        Send the replicates to an existing Dask cluster (its address, or a client) instead.
        Results come back to this process, which writes the files (the workers need privpost
        and the method's dependencies importable, but no shared file system). An address
        while this process holds a running client of that scheduler reuses the client. Every
        wait is bounded; a replicate whose worker dies is resubmitted (twice at most), and the
        finished replicates are kept (in ``outdir``) if the study stops.
    scheduler_timeout : float, optional
        With ``scheduler``: seconds without any replicate finishing before the study stops
        with an error (default 1800).
    lost_cluster_timeout : float, optional
        With ``scheduler``: seconds with no worker connected to the scheduler (or the
        scheduler not answering) before the study stops with an error saying the cluster was
        lost -- at most this many seconds plus 27 after the last worker died. Default: the
        environment variable ``PRIVPOST_DASK_LOST_TIMEOUT``, else 60. The finished replicates
        are kept in ``outdir``: rerun with workers to resume.
    outdir : path, optional
        Directory for per-replicate files (resumable), ``calibration.csv`` / ``.parquet``,
        ``summary.csv``, ``settings.json`` and the figures.
    progress : bool
        Rich progress bar on stderr.
    figures : bool
        Write PNG figures to ``outdir`` (``pit_ecdf.png``, ``pit_hist.png``,
        ``coverage_vs_epsilon.png``, ``ks_vs_n.png``).
    figure_entries : list of str, optional
        Parameter entries to plot (e.g. ``["p[0]", "p[1]"]``; default: the first four).

    Returns
    -------
    CalibrationResult
        ``.table`` columns: ``setting`` (cell hash), ``n``, ``epsilon``, ``replicate``,
        ``method`` (label), ``method_name``, ``exact``, ``parameter``, ``index``, ``entry``,
        ``truth``, ``level``, ``lower``, ``upper``, ``covered``, ``width``, ``pit``, ``rank``,
        ``draws``, ``mean``, ``sd``, ``abs_error``, ``mean_abs_error``, ``mmd2``, ``ess_bulk``,
        ``accept_mean``, ``accept_min``, ``seconds``.

    Examples
    --------
    >>> import privpost as pp
    >>> res = pp.calibrate("beta-bernoulli:a=2,b=2", {"type": "sum", "bounds": [0, 1]},
    ...                    {"type": "laplace"}, methods=["nonprivate", "naive"], n=[20],
    ...                    epsilon=[0.5], replicates=50, workers=1, progress=False)  # doctest: +SKIP
    >>> res.summary()[["method", "coverage", "ks"]]                                 # doctest: +SKIP
    """
    import pandas as pd

    mdl, qry, mspec = _coerce_inputs(model, query, mechanism)
    specs = _method_specs(methods)
    labels = [s.label for s in specs]
    if mmd_reference == "auto":
        mmd_reference = "nonprivate" if "nonprivate" in labels else None
    if mmd_reference is not None and mmd_reference not in labels:
        raise PrivpostError(f"mmd_reference {mmd_reference!r} is not among the methods {labels}")
    for s in specs:   # fail fast, naming any method that does not exist yet
        resolve_method(s.method)
    if isinstance(replicates, bool) or not isinstance(replicates, (int, np.integer)) or replicates < 1:
        raise PrivpostError(f"replicates must be an integer >= 1, got {replicates!r}")
    lvls = tuple(float(v) for v in _as_list(levels, "levels", float))
    if any(not 0 < v < 1 for v in lvls):
        raise PrivpostError(f"levels must lie in (0, 1), got {list(lvls)}")
    ns = [int(v) for v in _as_list(n, "n", int)]
    if any(v < 1 for v in ns):
        raise PrivpostError(f"n must be >= 1, got {ns}")
    eps = _as_list(epsilon, "epsilon", float)
    if any(e is not None and not e > 0 for e in eps):
        raise PrivpostError(f"epsilon must be > 0, got {eps}")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PrivpostError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    common = dict(method_options or {})
    if "seed" in common:
        raise PrivpostError("method_options: do not pass 'seed'; use calibrate(seed=...)")
    fixed = None
    if params is not None:
        fixed = {}
        for name, value in params.items():
            if name not in mdl.param_shapes:
                raise PrivpostError(f"params: {name!r} is not a parameter of model {mdl.name!r} "
                                    f"({list(mdl.param_shapes)})")
            arr = np.asarray(value, dtype=float)
            if arr.shape != tuple(mdl.param_shapes[name]):
                raise PrivpostError(f"params: {name!r} must have shape "
                                    f"{tuple(mdl.param_shapes[name])}, got {arr.shape}")
            fixed[name] = arr
        missing = [k for k in mdl.param_shapes if k not in fixed]
        if missing:
            raise PrivpostError(f"params: give every parameter of the model; missing {missing}")
    if parameters is not None:
        parameters = tuple(parameters)
        bad = [p for p in parameters if p not in mdl.param_shapes]
        if bad:
            raise PrivpostError(f"parameters {bad} are not parameters of model {mdl.name!r} "
                                f"({list(mdl.param_shapes)})")
    if hasattr(mdl, "check_query"):
        mdl.check_query(qry)

    method_doc = [{"label": s.label, "method": s.ident, "options": dict(s.options)} for s in specs]
    base = {
        "format": FORMAT_VERSION, "model": mdl, "neighbours": neighbours,
        "params": fixed if fixed is not None else "prior", "methods": method_doc,
        "default_options": DEFAULT_METHOD_OPTIONS, "common_options": common, "levels": list(lvls), "parameters": parameters,
        "mmd": {"reference": mmd_reference, "draws": mmd_draws, "bandwidth": mmd_bandwidth},
        "diagnostics": diagnostics, "seed": seed,
    }
    tasks: list[_Task] = []
    cells = []
    for nn in ns:
        q_n = _query_at(qry, nn)
        for e in eps:
            mech = _mechanism_at(mspec, e)
            e_val = float(e) if e is not None else _epsilon_of(mech, q_n, neighbours)
            key = _digest(base | {"query": q_n, "mechanism": mech, "n": nn})
            cells.append({"n": nn, "epsilon": e_val, "setting": key, "query": _jsonable(q_n),
                          "mechanism": _jsonable(mech)})
            for r in range(int(replicates)):
                tasks.append(_Task(
                    index=len(tasks), key=key, n=nn, epsilon=e_val, replicate=r, seed=seed,
                    model=mdl, query=q_n, mechanism=mech, neighbours=neighbours, params=fixed,
                    methods=specs, common=common, levels=lvls, parameters=parameters,
                    mmd_reference=mmd_reference, mmd_draws=int(mmd_draws),
                    mmd_bandwidth=mmd_bandwidth, diagnostics=bool(diagnostics)))
    settings = _jsonable(base | {"n": ns, "epsilon": [e for e in eps], "replicates": int(replicates),
                                 "query": qry, "mechanism": mspec, "cells": cells})

    out = Path(outdir) if outdir is not None else None
    frames: dict[int, Any] = {}
    todo = []
    for t in tasks:
        if out is not None:
            frame = _load(_replicate_path(out, t.key, t.replicate))
            if frame is not None:
                frames[t.index] = frame
                continue
        todo.append(t)
    reused = len(frames)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")

    with _Bar(progress, len(tasks), reused, console) as bar:
        def on_done(task, frame):
            if out is not None:
                _store(_replicate_path(out, task.key, task.replicate), frame)
            frames[task.index] = frame
            bar.advance()

        if not todo:
            pass
        elif scheduler is not None:
            _run_dask(todo, scheduler, on_done, scheduler_timeout, lost_cluster_timeout)
        else:
            w = workers if workers is not None else (os.cpu_count() or 1)
            if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1:
                raise PrivpostError(f"workers must be an integer >= 1, got {workers!r}")
            w = min(int(w), len(todo))
            if w == 1:
                _run_serial(todo, on_done)
            else:
                _run_pool(todo, w, on_done)

    table = pd.concat([frames[i] for i in range(len(tasks))], ignore_index=True)
    result = CalibrationResult(table=table, settings=settings, outdir=out,
                               computed=len(todo), reused=reused)
    if out is not None:
        result.save(out)
        if figures:
            result.plot(out, entries=figure_entries)
    return result
