"""Seed 002 speed-ups: DPreMCMCp4 (b = 5) and DPABCp5 against DPMCMCp1, as ratios of ESS/s.

Setting of the seed's timing sentence: alpha5 = (2.2, 3.3, 4.4, 5.5, 6.6), n = 5000, b = 5; we
use epsilon = 1.5 (eps1 = 0.25 eps, eps2 = 0.75 eps) and one DPss release per kind (no split for
DPMCMCp1, n1 = 0.25 n for p4/p5). The seed reports 6.2x (DPreMCMCp4) and 60.3x (DPABCp5) over
DPMCMCp1 (no absolute times, no code, no ESS).

Each MCMC runs with privpost's defaults (4 chains, until split R-hat <= 1.01 and bulk/tail ESS
>= 400, wall budget ``--max-seconds`` per call); DPreMCMCp4 also with the seed's sampler (records
proposed from Dir(alpha), no non-centred move: ``--seed-sampler``); DPABCp5 with ``--abc-draws``
accepted draws (independent: ESS = their count, measured anyway). Seconds include the prior's
construction (p4 bootstrap, p5 DPMCMC on D1), as in the seed's pipeline. ESS = the smallest
bulk/tail ESS over alpha_1..alpha_5; ESS/s = ESS / seconds; ratio = method ESS/s / DPMCMCp1's.
A method whose chains did not converge is flagged (its ESS/s is of chains that have not mixed).

Usage::

    python benchmarks/bench_compositional.py                  # n = 5000
    python benchmarks/bench_compositional.py --n 1000 --max-seconds 120
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np


def _worst(post):
    import arviz as az

    idata = post.to_arviz()
    ess = min(float(az.ess(idata, var_names=["alpha"], method=m)["alpha"].values.min())
              for m in ("bulk", "tail"))
    rhat = float(az.rhat(idata, var_names=["alpha"])["alpha"].values.max())
    return ess, rhat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--epsilon", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--abc-draws", type=int, default=1000)
    ap.add_argument("--methods", nargs="+", default=["DPMCMCp1", "DPreMCMCp4", "DPreMCMCp4-seed",
                                                     "DPABCp5"])
    a = ap.parse_args()

    import privpost as pp
    from privpost.releases.dpss import dpss_release
    from privpost.inference.compositional import DirichletProposal
    from privpost.models import Dirichlet

    alpha = np.array([2.2, 3.3, 4.4, 5.5, 6.6])
    x = np.random.default_rng(a.seed).dirichlet(alpha, a.n)
    e = a.epsilon
    rel = dpss_release(x, 0.25 * e, 0.75 * e, seed=a.seed)
    rel_s = dpss_release(x, 0.25 * e, 0.75 * e, split=0.25, seed=a.seed)
    model = Dirichlet(5)
    until = dict(draws=None, max_seconds=a.max_seconds, progress=False)
    warnings.simplefilter("ignore")
    # compile once (excluded from the timing)
    pp.infer(model, rel, method="dpmcmc", prior="p1", seed=0, draws=5, warmup=5, chains=1,
             progress=False, cores=1)
    runs = {
        "DPMCMCp1": dict(method="dpmcmc", prior="p1", **until),
        "DPreMCMCp4": dict(method="dpremcmc", prior="p4", b=5, **until),
        "DPreMCMCp4-seed": dict(method="dpremcmc", prior="p4", b=5, interweave=0,
                                proposal=DirichletProposal(), **until),
        "DPABCp5": dict(method="dpabc", prior="p5", draws=a.abc_draws,
                        p5_options=dict(draws=None, max_seconds=a.max_seconds)),
    }
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average at start "
          f"{os.getloadavg()}; n = {a.n}, eps = {e}, alpha5", flush=True)
    print("| method | seconds | draws | worst ESS | worst R-hat | ESS/s | ratio to DPMCMCp1 | "
          "mean alpha |\n|---|---|---|---|---|---|---|---|", flush=True)
    rate = {}
    for label in a.methods:
        kw = runs[label]
        r = rel if kw["prior"] == "p1" else rel_s
        t0 = time.perf_counter()
        post = pp.infer(model, r, seed=a.seed, **kw)
        sec = time.perf_counter() - t0
        ess, rhat = _worst(post)
        rate[label] = ess / sec
        m = post.draws["alpha"].reshape(-1, 5).mean(0)
        # one chain (DPABC's independent draws): no split R-hat across chains, ESS only
        ok = ess >= 400 and (rhat <= 1.01 or (rhat != rhat and post.draws["alpha"].shape[0] == 1))
        conv = "" if ok else " (NOT converged)"
        ratio = f"{rate[label] / rate['DPMCMCp1']:.3g}x" if "DPMCMCp1" in rate else "-"
        print(f"| {label}{conv} | {sec:.1f} | {post.draws['alpha'].shape[0]} x "
              f"{post.draws['alpha'].shape[1]} | {ess:.0f} | {rhat:.3f} | {rate[label]:.3g} | "
              f"{ratio} | {np.round(m, 2).tolist()} |", flush=True)
    print(f"load average at end {os.getloadavg()}; seed: DPreMCMCp4 6.2x, DPABCp5 60.3x "
          "(time ratios)")


if __name__ == "__main__":
    main()
