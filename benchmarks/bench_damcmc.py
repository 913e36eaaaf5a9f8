"""Benchmark of the DA-MCMC sampler on seed 000's linear-regression example.

Setting (Ju et al. 2022, Sec. 5): p = 2 covariates ~ N(m, I), m = (0.900142, -1.173346);
sigma^2 = 2 known; beta ~ N(0, 4 I); true beta = (-1.794971, -2.889003, -0.662027); x and y
clamped to [-10, 10] and normalised; Laplace noise with Delta = 13 on the 9 unique regression
statistics, epsilon = 1. One chain.

Reports, for the fully compiled driver (``fast_path=True``) and the generic path (NumPy proposals +
compiled accept/reject loop, ``fast_path=False``):

* ns per record update = sampling wall time / (iterations * n) (compilation excluded, reported
  separately);
* bulk ESS (ArviZ) and ESS per second of each beta_j (ESS over the post-warm-up draws, seconds
  = the whole run including warm-up);
* the ratio to dapper (R): dapper costs ~80,000 ns per record update, i.e. ~8 ms per iteration at
  n = 100. Its ESS/s is *estimated* as our ESS per iteration / dapper's time per iteration (it is
  the same algorithm, so it has the same ESS per iteration); the ratio is then
  dapper seconds per iteration / our seconds per iteration.

Usage::

    python benchmarks/bench_damcmc.py --n 100 --iterations 10000
    python benchmarks/bench_damcmc.py --n 10000 --iterations 1000 --paths fast
    python benchmarks/bench_damcmc.py --n 100 --profile        # generic-path overhead breakdown
    python benchmarks/bench_damcmc.py --n 100 --interweave 0 1 3  # non-centred theta-moves
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

M_COV = (0.900142, -1.173346)
BETA_TRUE = np.array([-1.794971, -2.889003, -0.662027])
DAPPER_NS_PER_RECORD = 80_000.0


def make_problem(n: int, epsilon: float = 1.0, seed: int = 2022):
    from privpost.mechanisms import Laplace
    from privpost.models.linear_regression import LinearRegression
    from privpost.queries import RegressionStats
    from privpost.releases.release import release

    model = LinearRegression(p=2, sigma2=2.0, tau2=4.0, m=list(M_COV))
    rng = np.random.default_rng(seed)
    records = model.simulate({"beta": BETA_TRUE}, n, rng)
    query = RegressionStats(bounds_x=[(-10, 10), (-10, 10)], bounds_y=(-10, 10), sensitivity=13)
    rel = release(records, query=query, mechanism=Laplace(epsilon=epsilon), seed=seed + 1)
    return model, rel


def bench(model, rel, iterations: int, fast: bool, seed: int = 7, warmup_frac: float = 0.1,
          repeat: int = 3, interweave: int = 0):
    """Time ``repeat`` identical runs (same seed, so same draws); report the median wall time
    (and the minimum) of the whole ``run`` call, compilation excluded (done by a first call)."""
    import arviz as az

    from privpost.inference.damcmc import run

    warmup = int(iterations * warmup_frac)
    draws = iterations - warmup
    t0 = time.perf_counter()
    run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False, fast_path=fast,
        interweave=interweave)
    compile_s = time.perf_counter() - t0
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        post = run(model, rel, draws=draws, warmup=warmup, chains=1, seed=seed, progress=False,
                   fast_path=fast, interweave=interweave)
        walls.append(time.perf_counter() - t0)
    wall = float(np.median(walls))
    n = rel.n
    beta = post.draws["beta"]            # (1, draws, 3)
    ess = np.array([float(az.ess(beta[:, :, j], method="bulk")) for j in range(3)])
    sec_per_iter = wall / iterations
    return {
        "path": ("compiled driver" if fast else "generic (NumPy + compiled loop)")
        + (f" + interweave={interweave}" if interweave else ""),
        "iw_accept": (float(post.chain_stats["interweave_accept_rate"].mean())
                      if interweave else None),
        "n": n, "iterations": iterations, "warmup": warmup, "wall_s": wall,
        "compile_s": compile_s, "ns_per_record": wall / (iterations * n) * 1e9,
        "ns_per_record_min": min(walls) / (iterations * n) * 1e9, "repeat": repeat,
        "ess": ess, "ess_per_s": ess / wall,
        "dapper_ess_per_s": ess / draws / (DAPPER_NS_PER_RECORD * 1e-9 * n),
        "ratio_vs_dapper": (DAPPER_NS_PER_RECORD * 1e-9 * n) / sec_per_iter,
        "accept": float(post.sample_stats["accept_rate"].mean()),
        "mean": beta.reshape(-1, 3).mean(axis=0), "sd": beta.reshape(-1, 3).std(axis=0),
    }


def profile_generic(model, rel, reps: int = 2000):
    """Per-iteration cost of each part of the generic path (microseconds)."""
    from privpost.inference import _kernels
    from privpost.inference.damcmc import _EMPTY, Sampler

    s = Sampler(model, rel)
    p = s.problem
    rng = np.random.default_rng(1)
    st = s.init(rng)
    for _ in range(50):
        s.step(st, rng)
    out = {}

    def tm(label, f):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        out[label] = (time.perf_counter() - t0) / reps * 1e6

    tm("whole iteration (Sampler.step)", lambda: s.step(st, rng))
    params = st.params
    tm("model.update", lambda: model.update(params, st.records, rng))
    tm("model.simulate (n proposals)", lambda: model.simulate(params, p.n, rng))
    prop = model.simulate(params, p.n, rng)
    tm("query.t (n proposals)", lambda: p.t(prop))
    tm("rng.standard_exponential(n)", lambda: rng.standard_exponential(p.n))
    tp = p.t(prop)
    lu = -rng.standard_exponential(p.n)
    T, tc = st.T.copy(), st.t_cur.copy()
    tm("compiled sweep (n records)", lambda: p.sweep(T, p.s_obs, tc, tp, _EMPTY, lu, p.weight,
                                                      st.accept, st.record_counts,
                                                      st.sweep_counts))
    acc = st.accept.copy()
    tm("copy accepted records", lambda: _kernels.copy_accepted(st.rec2d, prop, acc))
    return out


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
    import numba

    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, Numba {numba.__version__}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100])
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--paths", choices=["both", "fast", "generic"], default="both")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions (median reported)")
    ap.add_argument("--interweave", type=int, nargs="+", default=[0],
                    help="non-centred theta-moves per iteration (0 = off); each value > 0 runs "
                         "the generic path with damcmc(interweave=value) after the --paths runs")
    ap.add_argument("--profile", action="store_true",
                    help="print the per-iteration cost breakdown of the generic path")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}")
    for n in args.n:
        model, rel = make_problem(n, args.epsilon)
        if args.profile:
            print(f"\ngeneric path, per-iteration cost at n = {n} (microseconds):")
            for k, v in profile_generic(model, rel).items():
                print(f"  {k:34s} {v:9.2f}")
        paths = {"both": [True, False], "fast": [True], "generic": [False]}[args.paths]
        runs = [(fast, 0) for fast in paths] if 0 in args.interweave else []
        runs += [(False, iw) for iw in args.interweave if iw > 0]
        for fast, iw in runs:
            r = bench(model, rel, args.iterations, fast, repeat=args.repeat, interweave=iw)
            print(f"\nn = {n}, {r['iterations']} iterations ({r['warmup']} warm-up), {r['path']}")
            print(f"  wall {r['wall_s']:.3f} s median of {r['repeat']} (+ {r['compile_s']:.2f} s "
                  f"first call / compile): {r['ns_per_record']:.1f} ns per record update "
                  f"(best {r['ns_per_record_min']:.1f}), mean acceptance {r['accept']:.3f}"
                  + (f", interweave acceptance {r['iw_accept']:.3f}" if iw else ""))
            for j in range(3):
                print(f"  beta[{j}]: mean {r['mean'][j]:+.3f} sd {r['sd'][j]:.3f}  "
                      f"ESS {r['ess'][j]:8.1f}  ESS/s {r['ess_per_s'][j]:10.1f}  "
                      f"(dapper est. {r['dapper_ess_per_s'][j]:.2f} ESS/s)")
            print(f"  speed-up over dapper (same ESS per iteration): "
                  f"{r['ratio_vs_dapper']:.0f}x")


if __name__ == "__main__":
    main()
