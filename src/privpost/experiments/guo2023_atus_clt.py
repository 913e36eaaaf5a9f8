"""Cross-check of the ATUS study's DPMCMCp1 row (EXPERIMENTS.md §8.4, converged re-run):
DPapprox p1 (the CLT likelihood of model (6), cheap) on the DPMCMCp1 runs' own DPss releases
(same seeds as :func:`privpost.experiments.guo2023_atus.dp_unit`, eps = 0.5, no split) and, with
``--share 0.75``, on releases that give the statistic eps1 = 0.75 eps instead of 0.25 eps.

    python -m privpost.experiments.guo2023_atus_clt --share 0.25 --runs 0 15

Prints, per run, the posterior P(H0: |E[x_j|M] - E[x_j|F]| <= 0.01) of the three activities,
the decisions (reject when P(H0) < 0.5), the E&D share means and the max split R-hat of the
shares (4 chains x 1000 draws after 1000 warm-up).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def clt_run(data, r: int, share: float, epsilon: float = 0.5, seed: int = 2023) -> dict:
    """DPapprox p1 on run ``r``'s releases (eps1 = share * epsilon) of both groups."""
    import privpost as pp
    from privpost.releases.dpss import dpss_release
    from privpost.diagnostics import rhat
    from privpost.experiments import guo2023_atus as g
    from privpost.models import Dirichlet

    sh, rh = {}, []
    for gi, grp in enumerate(("F", "M")):
        rng = g._unit_rng(seed, g._TAG["DPMCMCp1"], r, gi)
        rel = dpss_release(data[grp], share * epsilon, (1 - share) * epsilon, seed=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = pp.infer(Dirichlet(3), rel, method="dpapprox", prior="p1", draws=1000,
                            warmup=1000, chains=4, seed=rng)
        a = post.draws["alpha"]
        s = a / a.sum(-1, keepdims=True)
        rh.append(max(rhat(s[..., j]) for j in range(3)))
        sh[grp] = s.reshape(-1, 3)
    rej, p0 = g._decide(sh["F"], sh["M"], True, g._unit_rng(seed, g._TAG["DPMCMCp1"], r, 9))
    return {"p0": p0.tolist(), "reject": rej.tolist(), "ed": [float(sh["F"][:, 1].mean()),
            float(sh["M"][:, 1].mean())], "rhat": max(rh)}


def main(argv=None) -> None:
    from privpost.experiments.guo2023_atus import load_atus

    ap = argparse.ArgumentParser(prog="python -m privpost.experiments.guo2023_atus_clt")
    ap.add_argument("--share", type=float, default=0.25)
    ap.add_argument("--runs", type=int, nargs=2, default=(0, 15), metavar=("FIRST", "END"))
    a = ap.parse_args(argv)
    data = load_atus()
    for r in range(*a.runs):
        t0 = time.perf_counter()
        u = clt_run(data, r, a.share)
        print(f"share {a.share} run {r}: P(H0) {np.round(u['p0'], 3).tolist()} reject "
              f"{u['reject']} F E&D mean {u['ed'][0]:.4f} M {u['ed'][1]:.4f} max R-hat "
              f"{u['rhat']:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
