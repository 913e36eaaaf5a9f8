"""Calibration of the MRF posteriors on small cases (issue 11, deliverable 4): coverage of the
clique marginal probabilities ``mu_C(i_C) = p_theta(x_C = i_C)``.

Each replicate draws ``theta`` from the model's prior, ``N`` records from ``p(. | theta)`` and
one Laplace release of the clique tables (scale ``2|C|/eps``, replace-one); every method then
gives draws of ``theta``, mapped to draws of ``mu(theta)`` (exact inference). For an exact
posterior, the equal-tailed ``L``-level interval of each ``mu_C(i_C)`` covers the truth with
probability exactly ``L`` when ``theta`` comes from the prior (averaged over the prior).

Standard errors: per cell, the binomial ``sqrt(L (1 - L) / R)`` over ``R`` replicates; for the
coverage pooled over all cells, the replicate-level standard error (cells of one replicate are
dependent), ``sd_r(cover fraction) / sqrt(R)``.

Why not :func:`privpost.calibrate`: it checks the model's *parameter* entries, here the
overcomplete log-potentials, whose unidentified part has its prior as exact posterior; the
quantities of interest, the marginal probabilities, are functions of all entries that
``calibrate`` has no hook for. The loop below is the same simulation-based check on ``mu``.

``naive`` and ``cgm-em`` are point estimates (no intervals): only their absolute error is
reported, beside the posterior means' error.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["coverage_study"]


def _theta_draws(model, post) -> np.ndarray:
    return np.concatenate([np.asarray(post.draws[nm]).reshape(
        np.asarray(post.draws[nm]).shape[:2] + (-1,)) for nm in model.names], axis=-1
    ).reshape(-1, model.dim)


def coverage_study(*, levels=(2, 2, 2), cliques=((0, 1), (1, 2)), N=20, epsilon=1.0,
                   replicates=200, prior_sd=1.0, draws=1000, warmup=300, chains=2,
                   intervals=(0.5, 0.9), methods=("damcmc", "mrf-laplace", "naive"), seed=0,
                   progress=True) -> list[dict]:
    """One row per (replicate, method, cell): truth, posterior mean, interval ends, covered."""
    import privpost as pp
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.mechanisms import Laplace
    from privpost.models import CliqueMRF

    model = CliqueMRF(list(levels), [list(c) for c in cliques], prior_sd=prior_sd)
    query = MarginalTables(list(levels), [list(c) for c in cliques])
    root = np.random.SeedSequence(seed)
    rows = []
    t0 = time.perf_counter()
    for r, ss in enumerate(root.spawn(replicates)):
        rng = np.random.default_rng(ss)
        params = model.prior_sample(rng)
        truth = model.marginals(model.flatten(params))[1]
        x = model.simulate(params, N, rng)
        rel = pp.release(x, query=query, mechanism=Laplace(epsilon=epsilon),
                         seed=int(rng.integers(2**62)))
        for meth in methods:
            opts = {}
            if meth == "damcmc":
                opts = dict(draws=draws, warmup=warmup, chains=chains, cores=1,
                            fast_path=True)
            elif meth == "mrf-laplace":
                opts = dict(draws=draws * chains)
            post = pp.infer(model, rel, method=meth, seed=int(rng.integers(2**62)),
                            progress=False, **opts)
            th = _theta_draws(model, post)
            mu = np.array([model.marginals(t)[1] for t in th])          # (S, d)
            mean = mu.mean(0)
            base = {"replicate": r, "method": meth, "N": N, "epsilon": epsilon}
            for j in range(model.dim):
                row = {**base, "cell": j, "truth": truth[j], "mean": mean[j],
                       "abs_error": abs(mean[j] - truth[j])}
                if mu.shape[0] > 1:
                    for L in intervals:
                        lo, hi = np.quantile(mu[:, j], [(1 - L) / 2, (1 + L) / 2])
                        row[f"covered_{L:g}"] = bool(lo <= truth[j] <= hi)
                rows.append(row)
        if progress and (r + 1) % 10 == 0:
            print(f"[cgm calibration] {r + 1}/{replicates} replicates "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return rows


def summarise(rows, intervals=(0.5, 0.9)):
    """Per method: pooled coverage per level with its replicate-level SE, the worst per-cell
    z-score against the binomial SE, and the mean absolute error of the posterior mean."""
    import pandas as pd

    df = pd.DataFrame(rows)
    out = []
    for meth, g in df.groupby("method", sort=False):
        R = g["replicate"].nunique()
        rec = {"method": meth, "replicates": R, "mae": float(g["abs_error"].mean()),
               "mae_se": float(g.groupby("replicate")["abs_error"].mean().std(ddof=1)
                               / np.sqrt(R))}
        for L in intervals:
            col = f"covered_{L:g}"
            if col not in g or g[col].isna().all():
                continue
            per_rep = g.groupby("replicate")[col].mean()
            per_cell = g.groupby("cell")[col].mean()
            rec[f"cov_{L:g}"] = float(per_rep.mean())
            rec[f"se_{L:g}"] = float(per_rep.std(ddof=1) / np.sqrt(R))
            rec[f"max_cell_z_{L:g}"] = float(np.max(np.abs(per_cell - L))
                                             / np.sqrt(L * (1 - L) / R))
        out.append(rec)
    return pd.DataFrame(out)
