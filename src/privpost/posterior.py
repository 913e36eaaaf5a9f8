"""The result of every inference method: posterior draws, sampler statistics and diagnostics.

A :class:`Posterior` holds draws as plain NumPy arrays with a leading ``(chains, draws)`` pair of
axes, exports them to ArviZ (so ``arviz`` summaries, R-hat, ESS and plots work), and writes and
reads netCDF files.
"""

from __future__ import annotations

import json
import warnings
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
    def to_arviz(self):
        """ArviZ ``InferenceData`` with ``posterior``, ``sample_stats`` (and ``chain_stats``) groups.

        The method, exactness flag, notes and the model and release descriptions are stored as
        attributes of the ``posterior`` group (JSON strings, so they survive netCDF).
        """
        import arviz as az
        import xarray as xr

        attrs = {
            "privpost_method": self.method,
            "privpost_exact": int(self.exact),
            "privpost_notes": json.dumps(self.notes),
            "privpost_model": json.dumps(self.model),
            "privpost_release": json.dumps(self.release),
            "privpost_converged": -1 if self.converged is None else int(self.converged),
        }
        idata = az.from_dict(posterior=self.draws, sample_stats=self.sample_stats or None)
        idata.posterior.attrs.update(attrs)
        if self.chain_stats:
            ds = xr.Dataset({
                k: xr.DataArray(v, dims=["chain"] + [f"{k}_dim_{i}" for i in range(v.ndim - 1)])
                for k, v in self.chain_stats.items()})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata.add_groups({"chain_stats": ds})
        if getattr(self, "_predictive", None) is not None:   # set by predictive()
            self._predictive.add_to(idata)
        return idata

    def summary(self, level: float = 0.9, var_names: list[str] | None = None):
        """Summary table: one row per scalar parameter entry.

        Columns: ``mean``, ``sd``, the equal-tailed ``level`` interval bounds and the median,
        ``mcse_mean``, ``mcse_sd``, ``ess_bulk``, ``ess_tail``, ``r_hat`` (rank-normalised split
        R-hat; computed on split halves even with one chain), at full precision
        (:mod:`privpost.diagnostics`: the ArviZ definitions, without importing ArviZ).

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
        rows, labels = [], []
        for name in var_names or self.draws:
            shape = self.draws[name].shape[2:]
            # the entry count from the shape (not -1): a run stopped before any draw has size 0
            flat = self.flat(name).reshape(self.n_chains * self.n_draws, int(np.prod(shape)))
            for j in range(flat.shape[1]):
                idx = np.unravel_index(j, shape) if shape else ()
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
                labels.append(label)
        return {lab: {k: float(v) for k, v in row.items()} for lab, row in zip(labels, rows)}

    def plot(self, path: str | None = None, var_names: list[str] | None = None):
        """Trace and density plots of every parameter (ArviZ ``plot_trace``).

        Saves a PNG to ``path`` when given; returns the matplotlib figure.
        """
        import arviz as az
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        with warnings.catch_warnings():  # ArviZ 0.x calls a Matplotlib API deprecated in 3.11
            warnings.simplefilter("ignore", DeprecationWarning)
            axes = az.plot_trace(self.to_arviz(), var_names=var_names, compact=True)
        fig = np.asarray(axes).ravel()[0].figure
        fig.suptitle(f"privpost posterior ({self.method})")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=100)
            plt.close(fig)
        return fig

    # ------------------------------------------------------------------ files
    def to_netcdf(self, path: str) -> str:
        """Write the ArviZ representation to a netCDF file (h5netcdf engine)."""
        return self.to_arviz().to_netcdf(str(path))

    @classmethod
    def from_netcdf(cls, path: str) -> "Posterior":
        """Read a file written by :meth:`to_netcdf`."""
        import arviz as az

        idata = az.from_netcdf(str(path))
        post = idata.posterior
        attrs = post.attrs
        draws = {k: post[k].values for k in post.data_vars}
        stats = ({k: idata.sample_stats[k].values for k in idata.sample_stats.data_vars}
                 if "sample_stats" in idata.groups() else {})
        chain_stats = ({k: idata.chain_stats[k].values for k in idata.chain_stats.data_vars}
                       if "chain_stats" in idata.groups() else {})
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
