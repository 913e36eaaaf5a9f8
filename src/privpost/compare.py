"""Every method on one release: one table and one overlay plot of the posteriors.

``compare(model, release)`` runs each analysis method that applies to the (model, release) pair
-- by default ``damcmc`` (exact), ``gibbs-ss`` (CLT approximation) and ``naive`` (noise ignored)
-- with the sampler settings given (each method's own defaults otherwise), and tabulates per
parameter entry: posterior mean, the equal-tailed ``level`` interval and its width, R-hat and
bulk ESS, the wall time of the run and whether the method is exact. A method that does not
apply (e.g. ``gibbs-ss`` for a model without an exponential-family CLT) is listed with the
reason, not silently dropped.

CLI: ``privpost compare RELEASE --model SPEC [--methods damcmc,naive] [--plot out.png] [--json]``
(also ``privpost infer RELEASE --method damcmc,naive ...``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from privpost.errors import IncompatibleError, PrivpostError

__all__ = ["compare", "Comparison", "DEFAULT_METHODS"]

# analysis methods that need only the release (nonprivate and ops need the confidential records)
DEFAULT_METHODS = ("damcmc", "gibbs-ss", "naive")


@dataclass
class Comparison:
    """Result of :func:`compare`.

    Attributes
    ----------
    posteriors : dict[str, Posterior]
        Method -> posterior, for the methods that ran.
    skipped : dict[str, str]
        Method -> why it does not apply.
    seconds : dict[str, float]
        Method -> wall time of its run.
    level : float
        Credible level of the intervals.
    """

    posteriors: dict
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    level: float = 0.9

    def rows(self) -> list[dict]:
        """One dict per (method, parameter entry): ``method, parameter, mean, lo, hi, width,
        r_hat, ess_bulk, seconds, exact``."""
        out = []
        for method, post in self.posteriors.items():
            table = post.summary(level=self.level)
            lo_c, hi_c = (f"q{100 * (1 - self.level) / 2:g}", f"q{100 * (1 + self.level) / 2:g}")
            for param, row in table.iterrows():
                lo, hi = float(row[lo_c]), float(row[hi_c])
                out.append({"method": method, "parameter": str(param), "mean": float(row["mean"]),
                            "lo": lo, "hi": hi, "width": hi - lo,
                            "r_hat": float(row.get("r_hat", np.nan)),
                            "ess_bulk": float(row.get("ess_bulk", np.nan)),
                            "seconds": self.seconds[method], "exact": bool(post.exact)})
        return out

    def to_dict(self) -> dict:
        return {"level": self.level, "rows": self.rows(), "skipped": dict(self.skipped),
                "notes": {m: list(p.notes) for m, p in self.posteriors.items()}}

    def plot(self, path=None, max_entries: int = 6):
        """Overlaid posterior densities (histograms) of each parameter entry, one line per method.

        Returns the matplotlib figure; saves a PNG to ``path`` when given.
        """
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        entries = _entries(next(iter(self.posteriors.values())))[:max_entries]
        ncol = min(3, len(entries))
        nrow = -(-len(entries) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.2 * nrow), squeeze=False)
        for ax, (label, name, idx) in zip(axes.ravel(), entries):
            for method, post in self.posteriors.items():
                flat = post.flat(name).reshape(post.n_chains * post.n_draws, -1)[:, idx]
                style = "-" if post.exact else "--"
                ax.hist(flat, bins=40, density=True, histtype="step", linestyle=style,
                        label=f"{method}{'' if post.exact else ' (approx.)'}")
            ax.set_title(label)
        for ax in axes.ravel()[len(entries):]:
            ax.set_visible(False)
        axes.ravel()[0].legend(fontsize=8)
        fig.suptitle("posteriors on one release")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=90)
            plt.close(fig)
        return fig


def _entries(post) -> list[tuple[str, str, int]]:
    """``(label, parameter, flat index)`` of every entry; labels name the axes the release
    names (:attr:`privpost.posterior.Posterior.axes`), like the summary's."""
    from privpost.names import entry_label

    out = []
    for name in post.param_names:
        shape = post.draws[name].shape[2:]
        for j in range(int(np.prod(shape)) if shape else 1):
            idx = tuple(int(i) for i in np.unravel_index(j, shape)) if shape else ()
            out.append((entry_label(name, idx, (post.axes or {}).get(name)), name, j))
    return out


def compare(model, release, methods: Sequence[str] | None = None, *, level: float = 0.9,
            options: dict | None = None, **common) -> Comparison:
    """Run several methods on one release.

    Parameters
    ----------
    model : privpost.models.Model
    release : privpost.Release (or ReleaseSet, for the methods that read one)
    methods : sequence of str, optional
        Method names (default :data:`DEFAULT_METHODS`). A named method that does not apply is
        reported in ``Comparison.skipped``; an unknown name raises.
    level : float
        Credible level of the intervals (0 < level < 1).
    options : dict, optional
        Per-method extra options, ``{method: {key: value}}``.
    **common
        Options passed to every method (``draws``, ``warmup``, ``chains``, ``seed``,
        ``progress``). ``draws``, ``warmup`` or ``chains`` left out or ``None``: each method's
        own default applies (e.g. ``damcmc`` runs until converged, ``ops`` runs one chain),
        not one setting imposed on all.

    Returns
    -------
    Comparison
    """
    from privpost.inference import METHODS, infer

    if not 0 < level < 1:
        raise PrivpostError(f"--level must be in (0, 1), got {level}")
    names = list(methods) if methods else list(DEFAULT_METHODS)
    if not methods and getattr(getattr(release, "mechanism", None), "name",
                               None) == "randomized_response":
        names = ["randomized-response", "naive"]   # naive: the reports taken as true categories
    if not methods and type(release).__name__ == "PenaltyRelease":
        names = ["penalty-mcmc"]                    # a transcript: the only method that reads it
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise PrivpostError(f"unknown method(s) {', '.join(map(repr, unknown))}; type a "
                            f"comma-separated list of {', '.join(DEFAULT_METHODS)}")
    # draws / warmup / chains None (no --draws etc.): each method's own default (damcmc and the
    # HMM samplers run until converged, ops runs 1 chain since every chain is released, ...)
    common = {k: v for k, v in common.items()
              if not (k in ("draws", "warmup", "chains") and v is None)}
    result = Comparison(posteriors={}, level=level)
    for method in dict.fromkeys(names):
        opts = dict(common)
        opts.update((options or {}).get(method, {}))
        t0 = time.perf_counter()
        try:
            post = infer(model, release, method=method, **opts)
        except IncompatibleError as exc:
            result.skipped[method] = str(exc)
            continue
        result.seconds[method] = time.perf_counter() - t0
        result.posteriors[method] = post
    if not result.posteriors:
        raise IncompatibleError("no method applies to this model and release: "
                                + "; ".join(f"{m}: {r}" for m, r in result.skipped.items()))
    return result
