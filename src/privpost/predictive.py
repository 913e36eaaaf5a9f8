"""Posterior predictive checks of a private release.

For posterior draws ``theta_s`` (a thinned subset, the same number from each chain) the
replicated release is drawn exactly as the curator drew the real one::

    x_rep ~ f(. | theta_s)            (n records, model.simulate)
    s_rep = mechanism.sample(query.statistic(x_rep))      (the privacy noise included)

so ``s_rep`` follows the posterior predictive law of the *released* values (for randomized
response, the counts of each reported level of the replicated reports), and the observed
release is compared with it coordinate by coordinate (tail probabilities ``P(s_rep >= s_obs)``,
two-sided ``p = 2 min(P(>=), P(<=))``) and jointly (the Mahalanobis distance of ``s_obs`` from the
predictive mean, ranked among the replicates' own distances). A small p says the model (or the
release's description) does not reproduce what was published. These are posterior predictive
p-values: they are not uniform under the model (they are conservative, concentrated near 0.5),
so read them as a check, not a test.

``post.predictive()`` (:meth:`privpost.posterior.Posterior.predictive`) returns a
:class:`PredictiveCheck`; after it, ``post.to_arviz()`` / ``post.to_netcdf()`` include the
``posterior_predictive`` (``released``, dims ``chain, draw, coordinate``) and ``observed_data``
groups. CLI: ``privpost infer RELEASE --model SPEC --predictive [--predictive-plot pp.png]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privpost.errors import IncompatibleError, PrivpostError

__all__ = ["PredictiveCheck", "predictive"]


@dataclass
class PredictiveCheck:
    """Replicated releases under the posterior and their comparison with the observed one.

    Attributes
    ----------
    replicated : ndarray, shape (chains, m, d)
        Replicated noisy released values (``m`` per chain).
    observed : ndarray, shape (d,)
    labels : list of str, length d
        Coordinate names (the release's labels).
    """

    replicated: np.ndarray
    observed: np.ndarray
    labels: list

    def __repr__(self) -> str:
        """One line: the replicates, the coordinates and the p-values (not the arrays, which
        made ``print(check)`` dump kilobytes; issue 24)."""
        c, m, d = self.replicated.shape
        p = self.p_values()
        worst = int(np.argmin(p)) if d else None
        tail = (f", smallest coordinate p = {p[worst]:.3g} ({self.labels[worst]})"
                if worst is not None else "")
        return (f"PredictiveCheck({c} x {m} replicates of {d} released value"
                f"{'s' if d != 1 else ''}: joint p = {self.joint_p_value():.3g}{tail})")

    @property
    def flat(self) -> np.ndarray:
        """Replicates pooled over chains, shape ``(chains * m, d)``."""
        return self.replicated.reshape(-1, self.replicated.shape[-1])

    def tail_probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(P(s_rep >= s_obs), P(s_rep <= s_obs))`` per coordinate, each shape ``(d,)``."""
        rep = self.flat
        return (rep >= self.observed).mean(axis=0), (rep <= self.observed).mean(axis=0)

    def p_values(self) -> np.ndarray:
        """Two-sided posterior predictive p-values ``min(1, 2 min(P(>=), P(<=)))``, ``(d,)``."""
        ge, le = self.tail_probabilities()
        return np.minimum(1.0, 2.0 * np.minimum(ge, le))

    def joint_p_value(self) -> float:
        """Fraction of replicates at least as far (Mahalanobis, predictive covariance) from the
        predictive mean as the observed release."""
        rep = self.flat
        mu = rep.mean(axis=0)
        cov = np.atleast_2d(np.cov(rep, rowvar=False))
        prec = np.linalg.pinv(cov)
        dist = lambda z: np.einsum("...i,ij,...j->...", z - mu, prec, z - mu)  # noqa: E731
        return float((dist(rep) >= dist(self.observed)).mean())

    def summary(self, level: float = 0.9):
        """Table (pandas DataFrame) per coordinate: observed, predictive mean / sd / interval,
        ``p_ge`` = P(s_rep >= s_obs), two-sided ``p``."""
        import pandas as pd

        rep = self.flat
        lo, hi = np.quantile(rep, [(1 - level) / 2, (1 + level) / 2], axis=0)
        ge, _ = self.tail_probabilities()
        return pd.DataFrame({
            "observed": self.observed, "pred_mean": rep.mean(axis=0),
            "pred_sd": rep.std(axis=0, ddof=1), f"q{100 * (1 - level) / 2:g}": lo,
            f"q{100 * (1 + level) / 2:g}": hi, "p_ge": ge, "p": self.p_values()},
            index=pd.Index(self.labels, name="coordinate"))

    def to_dict(self) -> dict:
        table = self.summary()
        return {"joint_p": self.joint_p_value(), "replicates": int(self.flat.shape[0]),
                "coordinates": {k: {c: float(v) for c, v in row.items()}
                                for k, row in table.iterrows()}}

    def groups(self) -> dict[str, dict]:
        """The ``posterior_predictive`` (``released``: chain, draw, coordinate) and
        ``observed_data`` (``released``: coordinate) groups, in the plain layout of
        :meth:`privpost.posterior.Posterior.groups` (coordinate = the release's labels)."""
        c, m = self.replicated.shape[:2]
        labels = np.asarray([str(v) for v in self.labels], dtype=str)
        return {
            "posterior_predictive": {
                "vars": {"released": (("chain", "draw", "coordinate"), self.replicated)},
                "coords": {"chain": np.arange(c), "draw": np.arange(m), "coordinate": labels},
                "attrs": {}},
            "observed_data": {
                "vars": {"released": (("coordinate",), np.asarray(self.observed))},
                "coords": {"coordinate": labels}, "attrs": {}}}

    def plot(self, path=None, max_coordinates: int = 6):
        """Histogram of the replicates per coordinate with the observed value; PNG to ``path``."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        d = min(len(self.labels), max_coordinates)
        ncol = min(3, d)
        nrow = -(-d // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.2 * nrow), squeeze=False)
        pvals = self.p_values()
        for j, ax in enumerate(axes.ravel()[:d]):
            ax.hist(self.flat[:, j], bins=40, density=True, color="0.7")
            ax.axvline(self.observed[j], color="C3", label="observed")
            ax.set_title(f"{self.labels[j]}  (p = {pvals[j]:.2f})", fontsize=9)
        for ax in axes.ravel()[d:]:
            ax.set_visible(False)
        axes.ravel()[0].legend(fontsize=8)
        fig.suptitle("posterior predictive check of the release")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=90)
            plt.close(fig)
        return fig


def _report_counts(release, reports) -> np.ndarray:
    """Randomized response: number of reports of each level, shape ``(k,)``."""
    k = int(release.mechanism.categories)
    return np.bincount(np.asarray(reports, dtype=np.int64).ravel(), minlength=k).astype(float)


def _release_of(post, release):
    from privpost.releases.release import Release, ReleaseSet

    if release is not None:
        return release
    doc = post.release
    if not isinstance(doc, dict):
        raise PrivpostError("this posterior does not store its release: pass release=")
    if doc.get("schema") == "privpost.release-set/1":
        return ReleaseSet.from_dict(doc)
    return Release.from_dict(doc)


def predictive(post, release=None, *, model=None, draws: int = 400, seed=None
               ) -> PredictiveCheck:
    """Posterior predictive replicates of the released values.

    Parameters
    ----------
    post : privpost.Posterior
    release : Release or ReleaseSet, optional
        Defaults to the release stored in ``post``. For a set, one record set is simulated per
        draw and every release's statistic (with its own noise) is computed from it; the
        coordinates are concatenated.
    model : Model, optional
        Defaults to the model stored in ``post``.
    draws : int
        Number of replicates (spread evenly over the chains, thinned evenly within each).
    seed : None, int or Generator

    Returns
    -------
    PredictiveCheck
    """
    from privpost._rng import as_generator
    from privpost.models import model_from_dict
    from privpost.releases.release import ReleaseSet

    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise PrivpostError(f"draws must be an integer >= 2, got {draws!r}")
    rel = _release_of(post, release)
    rels = rel.releases if isinstance(rel, ReleaseSet) else [rel]
    if model is None:
        if not isinstance(post.model, dict):
            raise PrivpostError("this posterior does not store its model: pass model=")
        model = model_from_dict(post.model)
    local = [r.mechanism.sensitivity_norm is None for r in rels]
    if any(local) and len(rels) > 1:
        raise IncompatibleError("predictive checks of a release set with randomized-response "
                                "reports are not implemented; check each release on its own")
    missing = [k for k in model.param_shapes if k not in post.draws]
    if missing:
        raise IncompatibleError(f"the posterior has no draws of {missing}, which the model "
                                f"needs to simulate records ({post.method})")
    rng = as_generator(seed)
    chains, total = post.n_chains, post.n_draws
    per = max(1, min(total, -(-int(draws) // chains)))
    idx = np.unique(np.linspace(0, total - 1, per).round().astype(int))
    n = rels[0].n
    d = sum(r.query.dim for r in rels)     # randomized response: k report counts
    out = np.empty((chains, idx.size, d))
    for c in range(chains):
        for j, i in enumerate(idx):
            params = {k: post.draws[k][c, i] for k in model.param_shapes}
            records = model.simulate(params, n, rng)
            parts = []
            for r in rels:
                if r.mechanism.sensitivity_norm is None:     # one report per record
                    reports = r.mechanism.sample(records, seed=rng)
                    parts.append(_report_counts(r, reports))
                    continue
                value = r.query.t(records, check=False).sum(axis=0)
                parts.append(np.asarray(r.mechanism.sample(value, seed=rng), dtype=float))
            out[c, j] = np.concatenate(parts)
    if local[0]:    # randomized response: compare the counts of each reported level
        observed = _report_counts(rels[0], rels[0].observed)
        labels = [f"reports[{lab[lab.index('[') + 1:-1]}]" for lab in rels[0].query.labels]
        return PredictiveCheck(replicated=out, observed=observed, labels=labels)
    observed = np.concatenate([r.observed for r in rels])
    labels = [lab for r in rels for lab in r.labels]
    if isinstance(rel, ReleaseSet):
        labels = [f"{k}:{lab}" for k, r in enumerate(rels) for lab in r.labels]
    return PredictiveCheck(replicated=out, observed=observed, labels=labels)
