"""CliqueMRF under damcmc: the fully compiled driver (models/_mrf_compiled.py) against the
generic path (NumPy proposals + compiled accept/reject loop), as ratios in the same run.

Same release, seed, chain length and chains for both paths (``interweave=False``; the MRF has
no non-centred move anyway). Compilation is excluded: a short warm-up call of each path runs
first. Reported: seconds per path, the speed ratio, and the bulk ESS per second of the smallest
clique marginal's ESS (the ESS of the two paths should agree within noise: same kernel).

Usage::

    python benchmarks/bench_mrf.py                      # 4-node loop, N = 200, 2000 iterations
    python benchmarks/bench_mrf.py --nodes 3 --n 20 --iterations 3000
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    import privpost as pp
    from privpost.diagnostics import ess_bulk
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.mechanisms import Laplace
    from privpost.models import CliqueMRF

    T = a.nodes
    cliques = [[i, (i + 1) % T] for i in range(T)] if T > 3 else [[0, 1], [1, 2]]
    model = CliqueMRF([2] * T, cliques, prior_sd=1.0)
    q = MarginalTables([2] * T, cliques)
    rng = np.random.default_rng(a.seed)
    x = model.simulate(model.prior_sample(rng), a.n, rng)
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=a.epsilon), seed=a.seed)
    warm = a.iterations // 5
    res = {}
    for fp in (True, False):
        pp.infer(model, rel, method="damcmc", draws=20, warmup=5, chains=1, seed=0, cores=1,
                 progress=False, fast_path=fp, interweave=False)           # compile
        t0 = time.perf_counter()
        post = pp.infer(model, rel, method="damcmc", draws=a.iterations - warm, warmup=warm,
                        chains=1, seed=a.seed, cores=1, progress=False, fast_path=fp,
                        interweave=False)
        sec = time.perf_counter() - t0
        th = np.concatenate([np.asarray(post.draws[nm]).reshape(1, -1, model.sizes[j])
                             for j, nm in enumerate(model.names)], axis=-1)
        mu = np.array([model.marginals(t)[1] for t in th[0]])[None]
        ess = min(float(ess_bulk(mu[..., j])) for j in range(mu.shape[-1]))
        res[fp] = (sec, ess)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.machine()} {os.cpu_count()} cpus, load average {load:.1f}; "
          f"T = {T} binary nodes, cliques {cliques}, N = {a.n}, eps = {a.epsilon}, "
          f"{a.iterations} iterations ({warm} warm-up), 1 chain")
    print("| path | seconds | min bulk ESS (clique marginals) | ESS/s |")
    print("|---|---|---|---|")
    for fp, lab in ((True, "compiled driver"), (False, "generic")):
        sec, ess = res[fp]
        print(f"| {lab} | {sec:.2f} | {ess:.0f} | {ess / sec:.0f} |")
    print(f"speed ratio generic / compiled: {res[False][0] / res[True][0]:.1f}x")


if __name__ == "__main__":
    main()
