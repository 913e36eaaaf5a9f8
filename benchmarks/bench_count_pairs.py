"""Count-level damcmc (issue 21): worst ESS and CPU seconds against the number of pair moves per
iteration and the share of them chosen by unit -- the measurements behind
``privpost.inference._count_table.default_pairs`` and ``DEFAULT_UNIT_FRAC``.

    python benchmarks/bench_count_pairs.py --pair nb --n 1e8 --fracs 1 0.25 0.1 [--unit 0.5]

Problems are ``bench_counts.problem`` (``bb``, ``hist10``, ``mrf4``, ``nb``). Each row is one
count-level run of fixed length (4 chains x (1,000 warm-up + 1,000 draws), seed 1, the engine's
data-driven start) with ``n_pairs = max(2, ceil(frac * J))`` (``frac`` 0 means the default
rule); CPU seconds of this process (``time.process_time``; steadier than wall time on a shared
machine) and the worst bulk-or-tail ESS over the parameter entries. Compilation is done by an
untimed first call. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_counts import problem  # noqa: E402

from privpost import diagnostics  # noqa: E402
from privpost.inference import _count_latent as cl  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="nb")
    ap.add_argument("--n", type=float, default=1e8)
    ap.add_argument("--fracs", nargs="+", type=float, default=[0.0, 1.0, 0.25, 0.1])
    ap.add_argument("--unit", nargs="+", type=float, default=[None], help="unit_frac values")
    a = ap.parse_args()
    n = int(a.n)
    model, rel = problem(a.pair, n, 1)
    print(f"load {os.getloadavg()[0]:.1f} at start")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cl.run(cl.count_law(model, rel, "counts"), model, rel, draws=20, warmup=20, chains=1,
               seed=0, progress=False)
        print("| pair | n | J | pair moves | unit share | CPU s | wall s | worst ESS | max R-hat |"
              " ESS/CPU-s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for frac in a.fracs:
            for uf in a.unit:
                law = cl.count_law(model, rel, "counts")
                if frac > 0:
                    law.n_pairs = max(2, int(math.ceil(frac * law.J)))
                if uf is not None:
                    law.unit_frac = uf
                t0, c0 = time.perf_counter(), time.process_time()
                post = cl.run(law, model, rel, draws=1000, warmup=1000, chains=4, seed=1,
                              progress=False)
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                ess, rh = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
                print(f"| {a.pair} | {n:.0e} | {law.J} | {law.n_pairs} | {law.unit_frac:.2f} | "
                      f"{cpu:.2f} | {wall:.2f} | {ess:.0f} | {rh:.3f} | {ess / cpu:.0f} |",
                      flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
