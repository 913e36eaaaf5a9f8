"""Benchmark of the sufficient-statistic Gibbs sampler (gibbs-ss): iterations per second and
ESS per second as the number of records grows, with damcmc on the same releases.

Problems
--------
* **binomial**: ``BetaBernoulli(1, 1)``, records Bernoulli(0.3), ``Sum(bounds=(0, 1))``, Laplace
  noise at epsilon = 0.1 (scale 10).
* **regression**: seed 000's example (p = 2 covariates ~ N(m, I), m = (0.900142, -1.173346),
  sigma^2 = 2 known, beta ~ N(0, 4 I), clamping to [-10, 10], Delta = 13, epsilon = 1), with
  ``covariate_moments="prior"`` (the model's fixed covariate law).

For each n the release is made once; gibbs-ss is timed with 1 chain and with 4 chains advancing
together (vectorised: the per-iteration cost is almost the same, so chain-iterations per second
nearly quadruple); damcmc runs 1 chain in this process (``cores=1``), with fewer iterations at
large n. Reported: wall time of the whole ``infer`` call, iterations per second (per chain),
bulk ESS per second of the main parameter (theta; beta[1] for regression), the wall time
including warm-up (10% of the iterations; half of them for gibbs-ss regression, whose collapsed
Metropolis step adapts its proposal during warm-up). The binomial runs
gibbs-ss's compiled loop; the regression sampler is NumPy (about 1-3 ms per iteration,
including the collapsed Metropolis step), whatever n.

Usage::

    python benchmarks/bench_gibbs_ss.py                      # n = 100, 10^4, 10^6, both problems
    python benchmarks/bench_gibbs_ss.py --n 100 10000 --problems binomial --no-damcmc
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore", category=FutureWarning)

M_COV = (0.900142, -1.173346)
BETA_TRUE = np.array([-1.794971, -2.889003, -0.662027])


def make_binomial(n: int, seed: int = 1):
    import privpost as pp
    from privpost.mechanisms import Laplace
    from privpost.models import BetaBernoulli
    from privpost.queries import Sum

    rng = np.random.default_rng(seed)
    x = (rng.random(n) < 0.3).astype(np.float64)
    rel = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=0.1), seed=seed + 1)
    return BetaBernoulli(1, 1), rel, ("theta", ())


def make_regression(n: int, seed: int = 2022):
    import privpost as pp
    from privpost.mechanisms import Laplace
    from privpost.models import LinearRegression
    from privpost.queries import RegressionStats

    model = LinearRegression(p=2, sigma2=2.0, tau2=4.0, m=list(M_COV))
    rec = model.simulate({"beta": BETA_TRUE}, n, np.random.default_rng(seed))
    q = RegressionStats(bounds_x=[(-10, 10), (-10, 10)], bounds_y=(-10, 10), sensitivity=13)
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=seed + 1)
    return model, rel, ("beta", (1,))


def _ess(post, name, idx):
    import arviz as az

    x = post.draws[name][(slice(None), slice(None)) + idx]
    return float(az.ess(x, method="bulk"))


def time_run(model, rel, method, iterations, chains, param, warmup=None, **opts):
    """``iterations`` = warm-up + retained draws per chain; wall time covers both."""
    import privpost as pp

    warmup = max(iterations // 10, 1) if warmup is None else warmup
    draws = iterations - warmup
    t0 = time.perf_counter()
    post = pp.infer(model, rel, method=method, draws=draws, warmup=warmup, chains=chains, seed=3,
                    progress=False, **opts)
    wall = time.perf_counter() - t0
    ess = _ess(post, *param) if draws >= 100 else float("nan")
    return {"method": method, "chains": chains, "iterations": iterations, "wall": wall,
            "it_per_s": iterations / wall, "chain_it_per_s": chains * iterations / wall,
            "ess": ess, "ess_per_s": ess / wall, "mean": float(np.mean(
                post.draws[param[0]][(slice(None), slice(None)) + param[1]]))}


def damcmc_iterations(n: int) -> int:
    return int(min(3000, max(60, 3e7 / max(n, 1) / 10)))


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores (load average {load:.1f} at start), Python "
            f"{platform.python_version()}, NumPy {np.__version__}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 10_000, 1_000_000])
    ap.add_argument("--problems", nargs="+", choices=["binomial", "regression"],
                    default=["binomial", "regression"])
    ap.add_argument("--iterations", type=int, default=2000,
                    help="gibbs-ss iterations per chain, regression")
    ap.add_argument("--binomial-iterations", type=int, default=200_000,
                    help="gibbs-ss iterations per chain, binomial (compiled loop)")
    ap.add_argument("--no-damcmc", action="store_true")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}")
    print("| problem | n | method | chains | iterations | wall s | it/s (per chain) | "
          "chain-it/s | ESS/s | posterior mean |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    makers = {"binomial": make_binomial, "regression": make_regression}
    for prob in args.problems:
        # warm-up call (imports, Numba compilation of damcmc kernels) outside the timings
        model, rel, param = makers[prob](100)
        time_run(model, rel, "gibbs-ss", 20, 1, param)
        if not args.no_damcmc:
            time_run(model, rel, "damcmc", 20, 1, param, cores=1)
        for n in args.n:
            model, rel, param = makers[prob](n)
            its = args.binomial_iterations if prob == "binomial" else args.iterations
            wu = None if prob == "binomial" else its // 2      # the collapsed step adapts
            rows = [time_run(model, rel, "gibbs-ss", its, c, param, warmup=wu) for c in (1, 4)]
            if not args.no_damcmc:
                rows.append(time_run(model, rel, "damcmc", damcmc_iterations(n), 1, param,
                                     cores=1))
            for r in rows:
                print(f"| {prob} | {n:,} | {r['method']} | {r['chains']} | {r['iterations']} | "
                      f"{r['wall']:.2f} | {r['it_per_s']:,.0f} | {r['chain_it_per_s']:,.0f} | "
                      f"{r['ess_per_s']:,.1f} | {r['mean']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
