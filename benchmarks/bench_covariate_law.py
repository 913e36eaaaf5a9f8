"""damcmc on the n = 2000 treated/dose regression (benchmarks/coverage_covariates.py, replicate 0):
wall time of the compiled driver with the declared per-column law (Bernoulli, uniform) against
the compiled driver with the default N(0, I) law and the generic path with the declared law.

    nice .venv/bin/python benchmarks/bench_covariate_law.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import privpost as pp  # noqa: E402
from coverage_covariates import model, replicate  # noqa: E402


def main():
    _, rel = replicate(0)
    kw = dict(draws=1000, warmup=1000, chains=4, cores=1, progress=False,
              predictive_check=False)
    for v, fast in (("declared", True), ("default", True), ("declared", False)):
        pp.infer(model(v), rel, method="damcmc", seed=1, fast_path=fast,
                 **{**kw, "draws": 50, "warmup": 50})             # compile / warm caches
        best = []
        for rep in range(3):
            t0 = time.perf_counter()
            post = pp.infer(model(v), rel, method="damcmc", seed=rep, fast_path=fast, **kw)
            best.append(time.perf_counter() - t0)
        ess = float(post.summary()["ess_bulk"].min())
        print(f"{v:9s} {'compiled' if fast else 'generic ':8s} min of 3: {min(best):6.2f} s "
              f"(4 chains x 2000 iterations, min bulk ESS {ess:.0f})", flush=True)


if __name__ == "__main__":
    main()
