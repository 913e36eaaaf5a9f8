"""The result of every inference method: posterior draws, sampler statistics and diagnostics.

A :class:`Posterior` holds draws as plain NumPy arrays with a leading ``(chains, draws)`` pair of
axes, exports them to ArviZ 1.x as an ``xarray.DataTree`` (so ``arviz`` summaries, R-hat, ESS and
plots work), and writes and reads netCDF files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["Posterior"]


def _as_draws(name: str, value: Any, shape: tuple[int, int] | None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim < 2:
        raise PrivpostError(f"draws of {name!r} must have shape (chains, draws, ...), got {arr.shape}")
    if shape is not None and arr.shape[:2] != shape:
        raise PrivpostError(
            f"draws of {name!r} have (chains, draws) = {arr.shape[:2]}, expected {shape}")
    return arr


@dataclass
class Posterior:
    """Posterior draws from one inference method.

    Parameters
    ----------
    draws : dict[str, ndarray]
        Parameter name -> array of shape ``(chains, draws, *param_shape)``.
    sample_stats : dict[str, ndarray]
        Per-draw sampler statistics, each ``(chains, draws, ...)`` (e.g. ``accept_rate``).
    method : str
        Name of the method that produced the draws (``"damcmc"``, ``"gibbs-ss"``, ...).
    model, release : dict or None
        JSON descriptions of the model and the release (kept in the exported metadata).
    notes : list of str
        Statements the user must see: approximations made, projections applied, interruptions.
    exact : bool
        True when the method targets the exact private posterior (up to Monte Carlo error).
    axes : dict or None
        Public names of parameter axes, ``{name: [(dim, values, keyed), ...]}`` (one entry per
        axis; :func:`privpost.names.axis_names`). Default: derived from ``model`` and
        ``release`` (histogram levels, regression columns, HMM region/time codes and level
        names, MRF variables). Used by :meth:`summary_rows` labels, :meth:`groups` dimensions
        and coordinates (so the ArviZ export and the netCDF file), :meth:`plot` legends and
        ``privpost infer --plot``.
    converged : bool or None
        Set by the MCMC samplers at the end of a run: True when every scalar parameter entry has
        split R-hat <= 1.01 and bulk and tail ESS >= 400 (:func:`privpost.diagnostics.check`),
        False otherwise (a note and a ConvergenceWarning say which); None when not checked.
    chain_stats : dict[str, ndarray]
        Per-chain statistics that are not per draw, each ``(chains, ...)`` (e.g. per-record
        acceptance fractions ``(chains, n)`` or a chain's minimum per-sweep acceptance).
    """

    draws: dict[str, np.ndarray]
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    method: str = "unknown"
    model: dict | None = None
    release: dict | None = None
    notes: list[str] = field(default_factory=list)
    exact: bool = True
    chain_stats: dict[str, np.ndarray] = field(default_factory=dict)
    converged: bool | None = None
    axes: dict | None = None

    def __post_init__(self) -> None:
        if not self.draws:
            raise PrivpostError("a Posterior needs at least one parameter")
        shape = None
        checked = {}
        for name, value in self.draws.items():
            arr = _as_draws(name, value, shape)
            shape = arr.shape[:2]
            checked[name] = arr
        self.draws = checked
        self.sample_stats = {k: _as_draws(k, v, shape) for k, v in self.sample_stats.items()}
        self.chain_stats = {k: np.asarray(v) for k, v in self.chain_stats.items()}
        self.notes = list(self.notes)
        if self.axes is None:
            from privpost.names import axis_names

            shapes = {k: v.shape[2:] for k, v in self.sample_stats.items()}
            shapes.update({k: v.shape[2:] for k, v in self.draws.items()})
            self.axes = axis_names(self.model, self.release, shapes)

    # ------------------------------------------------------------------ basic facts
    @property
    def n_chains(self) -> int:
        """Number of chains."""
        return next(iter(self.draws.values())).shape[0]

    @property
    def n_draws(self) -> int:
        """Number of retained draws per chain."""
        return next(iter(self.draws.values())).shape[1]

    @property
    def param_names(self) -> list[str]:
        return list(self.draws)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.draws[name]

    def flat(self, name: str) -> np.ndarray:
        """Draws of ``name`` pooled over chains: shape ``(chains * draws, *param_shape)``."""
        arr = self.draws[name]
        return arr.reshape((arr.shape[0] * arr.shape[1],) + arr.shape[2:])

    def mean(self, name: str) -> np.ndarray:
        """Posterior mean of ``name``, shape ``param_shape``."""
        return self.flat(name).mean(axis=0)

    def sd(self, name: str) -> np.ndarray:
        """Posterior standard deviation of ``name``, shape ``param_shape``."""
        return self.flat(name).std(axis=0, ddof=1)

    def quantile(self, name: str, q) -> np.ndarray:
        """Posterior quantile(s) ``q`` of ``name``: shape ``(*np.shape(q), *param_shape)``."""
        return np.quantile(self.flat(name), q, axis=0)

    def interval(self, name: str, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed central credible interval ``(lo, hi)``, each of shape ``param_shape``."""
        if not 0 < level < 1:
            raise PrivpostError(f"level must be in (0, 1), got {level}")
        lo, hi = self.quantile(name, [(1 - level) / 2, (1 + level) / 2])
        return lo, hi

    # ------------------------------------------------------------------ ArviZ
    def groups(self) -> dict[str, dict]:
        """The ArviZ 1.x layout of this posterior in plain NumPy, one entry per group.

        ``{group: {"vars": {name: (dims, array)}, "coords": {dim: array}, "attrs": {...}}}``
        with the groups ``posterior`` (every parameter, dims ``("chain", "draw",
        "NAME_dim_0", ...)``), ``sample_stats`` and ``chain_stats`` (dims ``("chain",
        "NAME_dim_0", ...)``) when not empty, and ``posterior_predictive`` / ``observed_data``
        after :meth:`predictive`. Every dimension has an integer coordinate ``0..size-1`` (as
        ``arviz_base.from_dict`` gives) except ``coordinate``, which holds the release's labels,
        and the named axes of :attr:`axes` (e.g. ``p`` over ``region = north, south, east``; an
        axis whose dimension name another variable uses with other values keeps the default).
        The method, exactness flag, notes, convergence flag and the model and release
        descriptions are attributes of ``posterior`` (JSON strings and integers, so they
        survive netCDF). :meth:`to_datatree` and :meth:`to_netcdf` both write this layout.
        """
        def group(arrays: dict, lead: tuple[str, ...], attrs: dict) -> dict:
            out: dict = {"vars": {}, "coords": {}, "attrs": attrs}
            for name, arr in arrays.items():
                arr = np.asarray(arr)
                named = (self.axes or {}).get(name) or [None] * (arr.ndim - len(lead))
                dims = list(lead)
                for i, ax in enumerate(named):
                    values = None if ax is None else np.asarray([str(v) for v in ax[1]])
                    have = None if ax is None else out["coords"].get(ax[0])
                    if ax is None or ax[0] in dims or (
                            have is not None and not np.array_equal(have, values)):
                        dims.append(f"{name}_dim_{i}")
                    else:
                        dims.append(ax[0])
                        out["coords"][ax[0]] = values
                out["vars"][name] = (tuple(dims), arr)
                for d, size in zip(dims, arr.shape):
                    out["coords"].setdefault(d, np.arange(size))
            return out

        attrs = {
            "privpost_method": self.method,
            "privpost_exact": int(self.exact),
            "privpost_notes": json.dumps(self.notes),
            "privpost_model": json.dumps(self.model),
            "privpost_release": json.dumps(self.release),
            "privpost_converged": -1 if self.converged is None else int(self.converged),
        }
        out = {"posterior": group(self.draws, ("chain", "draw"), attrs)}
        if self.sample_stats:
            out["sample_stats"] = group(self.sample_stats, ("chain", "draw"), {})
        if self.chain_stats:
            out["chain_stats"] = group(self.chain_stats, ("chain",), {})
        if getattr(self, "_predictive", None) is not None:   # set by predictive()
            out.update(self._predictive.groups())
        return out

    def to_datatree(self):
        """ArviZ 1.x data: an ``xarray.DataTree`` with the groups of :meth:`groups`.

        ``arviz`` 1.x (``arviz_stats``, ``arviz_plots``) takes it directly, e.g.
        ``az.summary(post.to_datatree())``, ``az.ess(post.to_datatree())``."""
        import xarray as xr

        return xr.DataTree.from_dict({
            name: xr.Dataset({k: (dims, arr) for k, (dims, arr) in g["vars"].items()},
                             coords={d: (d, c) for d, c in g["coords"].items()},
                             attrs=g["attrs"])
            for name, g in self.groups().items()})

    def to_arviz(self):
        """The same ``xarray.DataTree`` as :meth:`to_datatree` (kept for existing code).

        ArviZ 1.x replaced ``InferenceData`` by ``xarray.DataTree``, so this no longer returns an
        ``InferenceData``. What worked on the old object still works: ``idata.posterior``,
        ``idata.sample_stats["accept_rate"]``, ``"accept_rate" in idata.sample_stats``, and
        passing it to ``az.summary`` / ``az.ess`` / ``az.rhat`` / the plots. What does not:
        ``InferenceData`` methods such as ``idata.groups()`` (now the property
        ``idata.groups``, paths like ``"/posterior"``; or ``idata.children``) and
        ``idata.add_groups(...)`` (assign ``idata["name"] = xarray.DataTree(dataset)``).
        """
        return self.to_datatree()

    def summary(self, level: float = 0.9, var_names: list[str] | None = None):
        """Summary table: one row per scalar parameter entry.

        Columns: ``mean``, ``sd``, the equal-tailed ``level`` interval bounds and the median,
        ``mcse_mean``, ``mcse_sd``, ``ess_bulk``, ``ess_tail``, ``r_hat`` (rank-normalised split
        R-hat; computed on split halves even with one chain), at full precision
        (:mod:`privpost.diagnostics`: arviz-stats' definitions, without importing ArviZ; tail
        ESS at the 5 % and 95 % quantiles of Vehtari et al. 2021).

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        rows = self.summary_rows(level, var_names)
        return pd.DataFrame([{"parameter": k, **v} for k, v in rows.items()]).set_index(
            "parameter")

    def summary_rows(self, level: float = 0.9,
                     var_names: list[str] | None = None) -> dict[str, dict[str, float]]:
        """The :meth:`summary` table as ``{label: {column: value}}`` without pandas (quick)."""
        from privpost import diagnostics

        diag = diagnostics.summarise(self.draws, var_names)
        lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
        from privpost.names import entry_label

        rows, labels = [], []
        for name in var_names or self.draws:
            shape = self.draws[name].shape[2:]
            # the entry count from the shape (not -1): a run stopped before any draw has size 0
            flat = self.flat(name).reshape(self.n_chains * self.n_draws, int(np.prod(shape)))
            for j in range(flat.shape[1]):
                idx = tuple(int(i) for i in np.unravel_index(j, shape)) if shape else ()
                label = name + (f"[{', '.join(map(str, idx))}]" if shape else "")
                col = flat[:, j]
                if col.size == 0:       # no draws: every statistic is undefined (NaN)
                    rows.append({"mean": np.nan, "sd": np.nan, f"q{100 * lo_q:g}": np.nan,
                                 "q50": np.nan, f"q{100 * hi_q:g}": np.nan})
                else:
                    rows.append({"mean": col.mean(),
                                 "sd": col.std(ddof=1) if col.size > 1 else np.nan,
                                 f"q{100 * lo_q:g}": np.quantile(col, lo_q),
                                 "q50": np.quantile(col, 0.5),
                                 f"q{100 * hi_q:g}": np.quantile(col, hi_q)})
                rows[-1].update(diag[label])
                labels.append(entry_label(name, idx, (self.axes or {}).get(name)))
        return {lab: {k: float(v) for k, v in row.items()} for lab, row in zip(labels, rows)}

    def plot(self, path: str | None = None, var_names: list[str] | None = None):
        """Trace and density plots of every parameter (``arviz_plots.plot_trace_dist``,
        matplotlib backend), with a legend of the entries by their names (:attr:`axes`).

        Saves a PNG to ``path`` when given; returns the matplotlib figure.
        """
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import arviz_plots as azp
        import matplotlib.pyplot as plt

        pc = azp.plot_trace_dist(self.to_datatree(), var_names=var_names, compact=True,
                                 backend="matplotlib")
        color_dims = [d for d in pc.aes["color"].dims if d != "chain"] if "color" in pc.aes_set \
            else []
        if color_dims:       # a legend of the entries by name (e.g. region: north, south, ...)
            try:
                pc.add_legend(color_dims + ["__variable__"])
            except ValueError:   # arviz-plots mapped the colours otherwise: no legend, same plot
                pass
        fig = pc.viz["figure"].item()
        fig.suptitle(f"privpost posterior ({self.method})")
        if path is not None:
            fig.savefig(path, dpi=100)
            plt.close(fig)
        return fig

    # ------------------------------------------------------------------ files
    def to_netcdf(self, path: str) -> str:
        """Write :meth:`groups` to a netCDF4 file (one HDF5 group per ArviZ group).

        The file is what ``self.to_datatree().to_netcdf(path, engine="h5netcdf")`` writes --
        ``xarray.open_datatree(path)`` / ``arviz.from_netcdf(path)`` read it back identical to
        :meth:`to_datatree` (tests/test_posterior_io.py) -- but is written with h5netcdf alone
        (:mod:`privpost._netcdf`), without importing xarray, pandas, ArviZ or matplotlib.
        Returns ``path`` as a string."""
        from privpost._netcdf import write_groups

        write_groups(self.groups(), str(path))
        return str(path)

    @classmethod
    def from_netcdf(cls, path: str) -> "Posterior":
        """Read a file written by :meth:`to_netcdf` (or by ``to_arviz().to_netcdf`` of
        privpost with ArviZ 0.x: same groups and attributes)."""
        import xarray as xr

        with xr.open_datatree(str(path), engine="h5netcdf") as tree:
            def values(group: str) -> dict:
                if group not in tree.children:
                    return {}
                ds = tree[group].dataset
                return {k: ds[k].values for k in ds.data_vars}

            attrs = dict(tree["posterior"].attrs)
            draws, stats, chain_stats = (values(g) for g in
                                         ("posterior", "sample_stats", "chain_stats"))
        return cls(draws=draws, sample_stats=stats,
                   method=str(attrs.get("privpost_method", "unknown")),
                   model=json.loads(attrs.get("privpost_model", "null")),
                   release=json.loads(attrs.get("privpost_release", "null")),
                   notes=json.loads(attrs.get("privpost_notes", "[]")),
                   exact=bool(int(attrs.get("privpost_exact", 1))),
                   chain_stats=chain_stats,
                   converged=(None if int(attrs.get("privpost_converged", -1)) < 0
                              else bool(int(attrs["privpost_converged"]))))

    def predictive(self, release=None, *, model=None, draws: int = 400, seed=None):
        """Posterior predictive check of the release (:mod:`privpost.predictive`).

        Draws ``draws`` replicated releases (records from the model at posterior draws, then
        the statistic and the mechanism's noise) and returns a
        :class:`~privpost.predictive.PredictiveCheck` (``summary()``, ``p_values()``,
        ``plot()``). Afterwards :meth:`to_arviz` and :meth:`to_netcdf` also write the
        ``posterior_predictive`` and ``observed_data`` groups.
        """
        from privpost.predictive import predictive

        check = predictive(self, release, model=model, draws=draws, seed=seed)
        self._predictive = check
        return check

    def __repr__(self) -> str:
        params = ", ".join(f"{k}{list(v.shape[2:]) or ''}" for k, v in self.draws.items())
        return (f"Posterior(method={self.method!r}, exact={self.exact}, chains={self.n_chains}, "
                f"draws={self.n_draws}, params=[{params}])")
