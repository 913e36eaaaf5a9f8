"""Count-level damcmc on joint tables (issue 21): worst-parameter ESS/s of the default run
(until converged) against n, beside record-level damcmc where it finishes.

Pairs:

* ``nb``: seed 000's naive-Bayes model (I = 5 classes, K = 5 features with 3 levels, Dirichlet(2)
  priors; joint table of 5 x 3^5 = 1,215 cells) x NaiveBayesCounts with Laplace noise, eps = 1
  (scale 2K/eps = 10) on the 75 counts;
* ``mrf``: a 4-node binary loop CliqueMRF (prior_sd 1; joint table of 16 cells) x its 4 edge
  tables with Laplace noise, eps = 1 (scale 2|C|/eps = 8).

The releases at n up to 10^9 are drawn without records: the true table
``c ~ Multinomial(n, pi(theta_true))``, the statistic ``A c`` (the query of one record per cell,
summed with the table's weights), then the mechanism's own ``sample``. A run reports the wall
time of ``pp.infer`` (Numba compilation excluded by a first small call), the worst bulk/tail ESS
and R-hat over every parameter entry, and whether it converged within the budget
(``--max-seconds``, default 300 s).

    nice python benchmarks/bench_count_tables.py --pair nb --n 1e2,1e4,1e6,1e8,1e9 \\
        --records-up-to 1e4
    nice python benchmarks/bench_count_tables.py --pair mrf --n 1e2,1e4,1e6,1e8,1e9 \\
        --records-up-to 1e4
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import privpost as pp
from privpost import diagnostics
from privpost.mechanisms import Laplace
from privpost.release import Release


def problem(pair: str):
    """(model, query, theta_true, joint domain)."""
    from privpost.models._count_tables import joint_domain

    if pair == "nb":
        from privpost.models import NaiveBayesLogLinear
        from privpost.queries import NaiveBayesCounts

        model = NaiveBayesLogLinear(n_levels=[3] * 5, n_classes=5, class_alpha=2.0,
                                    feature_alpha=2.0)
        query = NaiveBayesCounts(5, [3] * 5)
        dom = joint_domain((5,) + (3,) * 5)
    else:
        from privpost.marginal_tables import MarginalTables
        from privpost.models import CliqueMRF

        cl = [[0, 1], [1, 2], [2, 3], [3, 0]]
        model = CliqueMRF([2] * 4, cl, prior_sd=1.0)
        query = MarginalTables([2] * 4, cl)
        dom = joint_domain((2,) * 4)
    theta = model.prior_sample(np.random.default_rng(0))
    return model, query, theta, dom


def cell_probs(model, theta, dom):
    if hasattr(model, "joint_log_probs"):
        lp = model.joint_log_probs(theta, dom)
    else:
        lp = np.array([float(model.log_likelihood(theta, x[None])[0]) for x in dom])
    p = np.exp(lp - lp.max())
    return p / p.sum()


def make_release(pair, n, seed=5):
    model, query, theta, dom = problem(pair)
    rng = np.random.default_rng(seed)
    c = rng.multinomial(n, cell_probs(model, theta, dom)).astype(np.float64)
    stat = np.asarray(query.t(dom, check=False), dtype=np.float64).T @ c
    mech = Laplace(epsilon=1.0).calibrate(query.sensitivity("l1", "replace"))
    obs = mech.sample(stat, seed=rng)
    return model, Release(query=query, mechanism=mech, n=int(n), observed=obs), (theta, dom, rng)


def records_release(pair, n, seed=5):
    """Same law, with records (for the record-level path)."""
    model, query, theta, dom = problem(pair)
    rng = np.random.default_rng(seed)
    x = model.simulate(theta, int(n), rng)
    return model, pp.release(x, query=query, mechanism=Laplace(epsilon=1.0), seed=seed)


def run_one(model, rel, latent, max_seconds):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="damcmc", seed=1, progress=False, latent=latent,
                        max_seconds=max_seconds)
    el = time.perf_counter() - t
    tab = diagnostics.summarise(post.draws)
    ess, rhat = diagnostics.worst(tab)
    conv = not diagnostics.check(post.draws, table=tab)
    draws = next(iter(post.draws.values())).shape[1]
    return el, ess, rhat, conv, draws


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", choices=("nb", "mrf"), default="nb")
    ap.add_argument("--n", default="1e2,1e4,1e6,1e8,1e9")
    ap.add_argument("--records-up-to", type=float, default=1e4)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    a = ap.parse_args()
    ns = [int(float(v)) for v in a.n.split(",")]
    print(f"# {a.pair}; load average {os.getloadavg()}")
    m, r, _ = make_release(a.pair, 1000)
    run_one(m, r, "counts", 5)        # compile
    print("| n | latent | seconds | draws/chain | worst ESS | worst R-hat | converged | ESS/s |")
    print("|---|---|---|---|---|---|---|---|")
    for n in ns:
        model, rel, _ = make_release(a.pair, n)
        el, ess, rhat, conv, draws = run_one(model, rel, "counts", a.max_seconds)
        print(f"| {n:.0e} | counts | {el:.1f} | {draws} | {ess:.0f} | {rhat:.3f} | {conv} | "
              f"{ess / el:.1f} |", flush=True)
        if n <= a.records_up_to:
            model, rel = records_release(a.pair, n)
            el, ess, rhat, conv, draws = run_one(model, rel, "records", a.max_seconds)
            print(f"| {n:.0e} | records | {el:.1f} | {draws} | {ess:.0f} | {rhat:.3f} | {conv} "
                  f"| {ess / el:.1f} |", flush=True)
    print(f"# load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
