"""Count-level damcmc (issue 21): worst-parameter ESS/s of the default run against n, beside
record-level damcmc (where it finishes) and gibbs-ss, ratios from one run.

    python benchmarks/bench_counts.py [--ns 1e2 1e4 1e5 1e6 1e8 1e9] [--records-max-n 1e5]
        [--records-seconds 300] [--seed 1] [--pairs bb hist10]

Pairs: ``bb`` -- BetaBernoulli(1, 1) x 0/1 Sum, Laplace eps = 1, observed round(0.3 n) + noise;
``hist10`` -- DirichletCategorical(alpha = 1, K = 10) x Histogram, discrete Gaussian at
rho = 0.5 (sigma = 1.41, the Census 2020 mechanism), observed n p + noise for a fixed p;
``nb`` -- seed 000's naive-Bayes model (I = 5 classes, K = 5 features with 3 levels,
Dirichlet(2) priors; joint table of 5 x 3^5 = 1,215 cells) x NaiveBayesCounts, Laplace eps = 1
(scale 2K/eps = 10) on the 75 counts; ``mrf4`` -- a 4-node binary loop CliqueMRF (prior_sd 1;
16 joint cells) x its 4 edge tables, Laplace eps = 1 (scale 2|C|/eps = 8). For these two the
true joint table is drawn as ``Multinomial(n, pi(theta))`` at a prior draw ``theta``
(``default_rng(0)``), the statistic is ``A c`` and the noise the mechanism's own ``sample``;
their count-level rows force ``latent="counts"`` (``"auto"`` takes the records below
``n = 8 J`` for mrf4), and gibbs-ss has no table for them (refused, no row). For ``nb`` the
count-level row is the class-by-feature margins latent (75 cells, since 26 Nov) and a
``damcmc (joint table)`` row runs the joint table of 1,215 cells (the latent before) beside it.

Every run is the method's default (4 chains, run until split R-hat <= 1.01 and bulk/tail
ESS >= 400, or its budget; record-level damcmc gets ``max_seconds=--records-seconds``), timed
around the ``privpost.infer`` call (Numba compilation and cache loading done by a first,
untimed call). ESS/s = smallest bulk-or-tail ESS over the parameter entries / that wall time;
ESS/CPU-s the same over the CPU time of the process (steadier than wall time on a shared
machine; record-level damcmc runs its chains in this thread, ``cores=1``, so both count the
same work).
Count-level damcmc and gibbs-ss are run ``--repeat`` times (same seed, so the same draws) and
the median time is reported (the machine is shared); record-level damcmc once. Prints a Markdown
table.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

import privpost
from privpost import diagnostics
from privpost.mechanisms import DiscreteGaussian, Laplace
from privpost.models import BetaBernoulli, DirichletCategorical
from privpost.queries import Histogram, Sum
from privpost.releases.release import Release

P10 = np.array([0.22, 0.16, 0.13, 0.11, 0.09, 0.08, 0.07, 0.06, 0.05, 0.03])


def problem(pair: str, n: int, seed: int):
    if pair in JOINT_PAIRS:
        return joint_problem(pair, n, seed)
    rng = np.random.default_rng(seed)
    if pair == "bb":
        q = Sum(bounds=(0, 1))
        m = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1"))
        true = float(rng.binomial(n, 0.3))
        rel = Release(q, m, n, [true + rng.laplace(0.0, m.scale)])
        return BetaBernoulli(1.0, 1.0), rel
    q = Histogram(10)
    m = DiscreteGaussian(rho=0.5).calibrate(q.sensitivity("l2"))
    true = rng.multinomial(n, P10).astype(float)
    obs = true + np.round(rng.normal(0.0, m.scale, 10))   # noise shape only matters here
    return DirichletCategorical(1.0, k=10), Release(q, m, n, obs)


def joint_problem(pair: str, n: int, seed: int):
    """``nb`` / ``mrf4``: (model, release) with the true joint table drawn without records."""
    from privpost.models._count_tables import joint_domain

    if pair == "nb":
        from privpost.models import NaiveBayesLogLinear
        from privpost.queries import NaiveBayesCounts

        model = NaiveBayesLogLinear(n_levels=[3] * 5, n_classes=5, class_alpha=2.0,
                                    feature_alpha=2.0)
        q = NaiveBayesCounts(5, [3] * 5)
        dom = joint_domain((5,) + (3,) * 5)
        theta = model.prior_sample(np.random.default_rng(0))
        lp = model.joint_log_probs(theta, dom)
    else:
        from privpost.queries.marginal_tables import MarginalTables
        from privpost.models import CliqueMRF

        cl = [[0, 1], [1, 2], [2, 3], [3, 0]]
        model = CliqueMRF([2] * 4, cl, prior_sd=1.0)
        q = MarginalTables([2] * 4, cl)
        dom = joint_domain((2,) * 4)
        theta = model.prior_sample(np.random.default_rng(0))
        lp = model.log_likelihood(theta, dom)
    pi = np.exp(lp - lp.max())
    rng = np.random.default_rng(seed)
    c = rng.multinomial(n, pi / pi.sum()).astype(float)
    stat = np.asarray(q.t(dom, check=False), dtype=float).T @ c
    m = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1"))
    return model, Release(q, m, n, m.sample(stat, seed=rng))


JOINT_PAIRS = ("nb", "mrf4")


def _timed_runs(run, repeat):
    """``(median wall s, median CPU s of this process, worst ESS, max R-hat, posterior)`` of
    ``repeat`` calls of ``run()`` (a posterior; the last one is summarised)."""
    times, cpus = [], []
    for _ in range(repeat):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            c0 = time.process_time()
            post = run()
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    wall, cpu = float(np.median(times)), float(np.median(cpus))
    if post.n_draws < 4:      # the budget ended in the warm-up: no usable draws
        return wall, cpu, 0.0, float("nan"), post
    ess, rhat = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
    return wall, cpu, ess, rhat, post


def timed(model, rel, method, repeat=1, **opts):
    """:func:`_timed_runs` of ``privpost.infer(model, rel, method=method, **opts)``."""
    return _timed_runs(lambda: privpost.infer(model, rel, method=method, progress=False, **opts),
                       repeat)


def timed_joint(model, rel, repeat, seed):
    """:func:`timed` for the naive-Bayes JOINT table (``naive_bayes_table``; ``latent="counts"``
    takes the class-by-feature margins since 26 Nov), the same default run until converged."""
    from privpost.inference import _count_latent
    from privpost.models import NaiveBayesLogLinear
    from privpost.models._count_tables import naive_bayes_table

    def run():
        law = naive_bayes_table(model, rel, NaiveBayesLogLinear)
        return _count_latent.run(law, model, rel, seed=seed, progress=False)

    return _timed_runs(run, repeat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", nargs="+", type=float, default=[1e2, 1e4, 1e5, 1e6, 1e8, 1e9])
    ap.add_argument("--records-max-n", type=float, default=1e5)
    ap.add_argument("--records-seconds", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pairs", nargs="+", default=["bb", "hist10"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-joint", action="store_true",
                    help="nb: leave out the joint-table row (the latent before the margins)")
    a = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f} at start; numpy {np.__version__}")
    for pair in a.pairs:      # compile once, untimed
        model, rel = problem(pair, 100, 0)
        privpost.infer(model, rel, method="damcmc", draws=20, warmup=10, progress=False,
                       latent="counts")
        privpost.infer(model, rel, method="damcmc", draws=20, warmup=10, progress=False,
                       latent="records", cores=1)
    print("| pair | n | method | seconds | CPU s | worst ESS | max R-hat | ESS/s | ESS/CPU-s | "
          "counts ESS/s ÷ this | counts ESS/CPU-s ÷ this |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for pair in a.pairs:
        for nf in a.ns:
            n = int(nf)
            model, rel = problem(pair, n, a.seed)
            rows = []
            dt, cpu, ess, rh, post = timed(model, rel, "damcmc", repeat=a.repeat, seed=a.seed,
                                           latent="counts")
            assert privpost.inference._count_latent.latent_of(post)[0] == "counts"
            base, base_cpu = ess / dt, ess / cpu
            rows.append(("damcmc (counts)", dt, cpu, ess, rh))
            if pair == "nb" and not a.no_joint:
                rows.append(("damcmc (joint table)",) + timed_joint(model, rel, a.repeat,
                                                                    a.seed)[:4])
            if n <= a.records_max_n:
                rows.append(("damcmc (records)",) + timed(model, rel, "damcmc", seed=a.seed,
                                                          latent="records", cores=1,
                                                          max_seconds=a.records_seconds)[:4])
            if pair not in JOINT_PAIRS:
                rows.append(("gibbs-ss",) + timed(model, rel, "gibbs-ss", repeat=a.repeat,
                                                  seed=a.seed)[:4])
            for name, dt_, cpu_, ess_, rh_ in rows:
                rate, rate_cpu = ess_ / dt_, ess_ / max(cpu_, 1e-9)
                ratio = ratio_cpu = ""
                if name != "damcmc (counts)":
                    ratio = f"{base / rate:.3g}" if rate > 0 else "no draws in budget"
                    ratio_cpu = f"{base_cpu / rate_cpu:.3g}" if rate_cpu > 0 else ""
                print(f"| {pair} | {n:.0e} | {name} | {dt_:.2f} | {cpu_:.2f} | {ess_:.0f} | "
                      f"{rh_:.4f} | {rate:.0f} | {rate_cpu:.0f} | {ratio} | {ratio_cpu} |",
                      flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
