"""HMM samplers (seed 004 §5): seconds per iteration of naive / ops / damcmc / nonprivate on the
simulated war-log shapes, as ratios to naive measured in the same run.

    PYTHONPATH=src python benchmarks/bench_hmm.py [--regime dense|sparse] [--states 10]
        [--iterations 200] [--repeats 3] [--epsilon 5]

    PYTHONPATH=src python benchmarks/bench_hmm.py --ess-vs-n 10,100,1000,10000,1000000,100000000
        [--record-max 10000] [--epsilon 1] [--iterations 1500] [--repeats 1]

``--ess-vs-n``: damcmc's count-level latent (the default, ``latent="counts"``) against the
record-level one (``latent="records"``) as every cell's size ``N`` grows: a 2 x 8 grid of cells
of ``N`` reports each (features of 4, 2 and 2 levels, fixed emissions), a Laplace release at
``--epsilon``, ``HiddenMarkovNB(K, ...)`` fitted with 4 chains x ``iterations`` (a third
warm-up). ``--ess-states 1`` (default): one state, so the chain is the latent's imputation and
the theta draw only -- the latent's own mixing; ``--ess-states 2``: a 2-state HMM (persistence
0.9), where at large ``N`` the z / theta Gibbs moves themselves can be trapped in a partition of
the cells whatever the latent. Per path and ``N``: wall seconds of ``pp.infer``, worst bulk/tail
ESS over every scalar of theta (and pi, A when K = 2; relabelled per draw;
:func:`privpost.diagnostics.worst`), worst split R-hat, and worst ESS per second. The record
path runs up to ``--record-max``.

Numba compilation is excluded (a warm-up call first). Prints one line per method: median
seconds over ``repeats`` runs, seconds per iteration, ns per latent (report, feature) update
for damcmc's record-level latent, and the ratio to naive. ``damcmc`` is the default
count-level latent, ``damcmc (records)`` the record-level one. OPS three ways: ``ops`` (the sampler's: emission update
compiled end to end, slice-sampling pairwise fallback), ``ops (exact, batched)`` (rejection
compiled in one call per iteration, exact truncated-Beta fallback in Python) and ``ops
(per-block loop)`` (the original: one ``truncated_dirichlet_step`` call per state and feature;
bit-identical to the batched exact variant, tests/test_hmm.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import warnings

import numpy as np

import privpost as pp
from privpost.mechanisms import Laplace
from privpost.models.hmm import HiddenMarkovNB, simulate_warlogs


def ess_vs_n(sizes, record_max, epsilon, iterations, states=1, seed=1) -> None:
    """The ``--ess-vs-n`` table (module docstring)."""
    from privpost import diagnostics

    K = int(states)
    model = HiddenMarkovNB(K, (4, 2, 2))
    rng = np.random.default_rng(seed)
    params = {"pi": np.array([0.5, 0.5]), "A": np.array([[0.9, 0.1], [0.1, 0.9]]),
              "theta1": np.array([[0.55, 0.25, 0.15, 0.05], [0.05, 0.15, 0.25, 0.55]]),
              "theta2": np.array([[0.8, 0.2], [0.3, 0.7]]),
              "theta3": np.array([[0.4, 0.6], [0.6, 0.4]])}
    if K == 1:
        params = {"pi": np.ones(1), "A": np.ones((1, 1)),
                  **{k: v[:1] for k, v in params.items() if k.startswith("theta")}}
    elif K != 2:
        raise SystemExit("--ess-states must be 1 or 2")
    z = model.simulate_paths(params, 2, 8, rng)
    # worst ESS / R-hat over the emission entries (pi and A are constant when K = 1)
    names = [f"theta{d + 1}" for d in range(3)] + (["pi", "A"] if K > 1 else [])
    warm = iterations // 3
    print(f"# {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, "
          f"2 x 8 cells, K = {K}, levels (4, 2, 2), Laplace eps = {epsilon}, 4 chains x "
          f"({warm} + {iterations - warm}); worst over {', '.join(names)}", flush=True)
    print("N per cell   reports      latent    seconds  worst ESS  worst R-hat  ESS/s", flush=True)
    warmed = set()
    for N in sizes:
        cells = np.full((2, 8), N, dtype=np.int64)
        counts = np.zeros((16, model.width))
        for c in range(16):            # the cells' true counts: Multinomial(N, theta[z_c])
            k = z.ravel()[c]
            for d, (o, J) in enumerate(zip(model.offsets, model.n_levels)):
                counts[c, o:o + J] = rng.multinomial(N, params[f"theta{d + 1}"][k])
        from privpost.queries.cell_counts import CellCounts
        from privpost.releases.release import Release

        q = CellCounts(model.n_levels, cells)
        mech = Laplace(epsilon=epsilon).calibrate(q.sensitivity("l1"))
        noisy = counts.ravel() + rng.laplace(0.0, mech.scale, q.dim)
        rel = Release(query=q, mechanism=mech, n=int(cells.sum()), observed=noisy)
        for latent in ("counts", "records"):
            if latent == "records" and N > record_max:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if latent not in warmed:
                    pp.infer(model, rel if N <= 1000 else _small(model), method="damcmc",
                             draws=2, warmup=1, chains=1, seed=0, latent=latent)
                    warmed.add(latent)
                t0 = time.perf_counter()
                post = pp.infer(model, rel, method="damcmc", draws=iterations - warm,
                                warmup=warm, chains=4, seed=seed, latent=latent)
                dt = time.perf_counter() - t0
            ess, rh = diagnostics.worst(diagnostics.summarise(
                {k: post.draws[k] for k in names}, cheap=True))
            print(f"{N:>10d}  {int(cells.sum()):>9d}  {latent:>8s}  {dt:8.2f}  {ess:9.0f}  "
                  f"{rh:11.3f}  {ess / dt:7.1f}", flush=True)


def _small(model):
    """A tiny release for the compile-warming call."""
    from privpost.queries.cell_counts import CellCounts
    from privpost.releases.release import Release

    q = CellCounts(model.n_levels, [[2, 2]])
    mech = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1"))
    return Release(query=q, mechanism=mech, n=4, observed=np.ones(q.dim))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ess-vs-n", default=None,
                    help="comma-separated cell sizes: the count- vs record-level damcmc table")
    ap.add_argument("--record-max", type=int, default=10_000)
    ap.add_argument("--ess-states", type=int, default=1,
                    help="K of the --ess-vs-n study: 1 (the latent's own mixing) or 2")
    ap.add_argument("--regime", default="dense", choices=("dense", "sparse"))
    ap.add_argument("--states", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=None)
    a = ap.parse_args()
    if a.ess_vs_n:
        ess_vs_n([int(float(v)) for v in a.ess_vs_n.split(",")], a.record_max,
                 1.0 if a.epsilon is None else a.epsilon,
                 1500 if a.iterations == 200 else a.iterations, a.ess_states)
        return
    if a.epsilon is None:
        a.epsilon = 5.0
    data = simulate_warlogs(a.regime, seed=1)
    rel = pp.release(data["records"], query=data["query"], mechanism=Laplace(epsilon=a.epsilon),
                     seed=2)
    model = HiddenMarkovNB(a.states, data["query"].n_levels)
    warm, draws = a.iterations // 2, a.iterations - a.iterations // 2
    print(f"# {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, "
          f"{a.regime}: {data['records'].shape[0]} reports, {data['cell_sizes'].size} cells, "
          f"K = {a.states}, {a.iterations} iterations")
    times = {}
    import privpost.inference.hmm as H

    def per_block(rng, conc, off, levels, a0, theta, tries=1, sweeps=3):
        for k in range(conc.shape[0]):
            for d in range(len(levels)):
                blk = slice(int(off[d]), int(off[d] + levels[d]))
                theta[k, blk] = H.truncated_dirichlet_step(rng, conc[k, blk], a0[d],
                                                           theta[k, blk], tries, sweeps)

    batched = H.truncated_dirichlet_blocks

    def exact_batched(*args, **kw):
        return batched(*args, fallback="exact", **kw)

    variants = {"ops": batched, "ops (exact, batched)": exact_batched,
                "ops (per-block loop)": per_block}
    for label in ("naive", *variants, "damcmc", "damcmc (records)", "nonprivate"):
        method = label.split(" ")[0]
        H.truncated_dirichlet_blocks = variants.get(label, batched)
        kw = {"records": data["records"]} if method in ("ops", "nonprivate") else {}
        if label == "damcmc (records)":
            kw["latent"] = "records"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.infer(model, rel, method=method, draws=2, warmup=1, seed=0, diagnose=False, **kw)
            runs = []
            for r in range(a.repeats):
                t0 = time.perf_counter()
                pp.infer(model, rel, method=method, draws=draws, warmup=warm, seed=r,
                         diagnose=False, **kw)
                runs.append(time.perf_counter() - t0)
        times[label] = statistics.median(runs)
    H.truncated_dirichlet_blocks = batched
    n_latent = data["records"].shape[0] * len(data["query"].n_levels)
    for method, t in times.items():
        extra = (f", {1e9 * t / (a.iterations * n_latent):.0f} ns per latent update"
                 if method == "damcmc (records)" else "")
        print(f"{method:21s} {t:8.3f} s  {1e3 * t / a.iterations:8.2f} ms/iteration  "
              f"ratio to naive {t / times['naive']:6.2f}{extra}")


if __name__ == "__main__":
    main()
