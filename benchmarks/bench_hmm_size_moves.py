"""Cost of the latent-size birth/death moves per damcmc iteration (issue 23, Deliver 4).

On the war-log shapes of docs/hmm.md (``simulate_warlogs("sparse" | "dense")``: 5 x 72 and
5 x 59 cells, 5 features of 8, 20, 2, 2, 2 levels), counts released at eps = 5 (Laplace scale
2) and sizes at eps_N = 0.5 (discrete Laplace t_N = 4): times one call of
:func:`privpost.inference._hmm_sizes.size_moves` as the sampler makes it (``_SIZE_MOVES`` per
cell, steps 1..ceil(t_N)) and of :func:`~privpost.inference._hmm_sizes.transfer_moves`
(``size_total="fixed"``, the default) against one
:func:`~privpost.inference._hmm_core.count_sweep` (the
pair moves every iteration already makes), from the true state and emissions, min of 5 repeats
of 200 calls each after a warm-up (Numba compiled). Then a whole-sampler comparison: hmm damcmc
with exact vs noisy sizes, fixed draws, wall time per iteration.

    nice .venv/bin/python benchmarks/bench_hmm_size_moves.py
"""

from __future__ import annotations

import math
import os
import time
import warnings

import numpy as np

import privpost as pp
from privpost.inference import hmm as H
from privpost.inference._hmm_core import count_sweep
from privpost.inference._hmm_sizes import size_moves, transfer_moves
from privpost.mechanisms import Laplace
from privpost.models.hmm import HiddenMarkovNB, simulate_warlogs
from privpost.queries.cell_counts import CellCounts
from privpost.releases.cells import release_cells


def per_call(fn, reps=200, rounds=5):
    fn()
    best = math.inf
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main():
    print("load:", os.getloadavg())
    for regime in ("sparse", "dense"):
        sim = simulate_warlogs(regime, seed=0)
        model = sim["model"]
        q = CellCounts(model.n_levels, sim["cell_sizes"])
        rs = release_cells(sim["records"], q, Laplace(epsilon=5.0), epsilon_sizes=0.5, seed=1)
        counts_rel, sizes_rel = rs.releases
        R, T = sim["cell_sizes"].shape
        z = np.ascontiguousarray(sim["z"], dtype=np.int64)
        theta = np.ascontiguousarray(np.concatenate(
            [sim["params"][f"theta{d + 1}"] for d in range(model.n_features)], axis=1))
        counts = q.cell_matrix(q.statistic(sim["records"])).copy()
        sizes = sim["cell_sizes"].ravel().astype(np.float64).copy()
        obs = np.ascontiguousarray(q.cell_matrix(counts_rel.observed))
        obs_size = np.ascontiguousarray(sizes_rel.observed)
        use = np.ones(R * T, dtype=np.int64)
        rng = np.random.default_rng(0)
        off, lev = model.offsets, model.levels_arr
        t_sm = per_call(lambda: size_moves(z, theta, off, lev, counts, sizes, obs, obs_size,
                                           0.5, False, 0.25, False, 0, float(rs.releases[0].n),
                                           4, H._SIZE_MOVES, use, rng))
        t_tr = per_call(lambda: transfer_moves(z, theta, off, lev, counts, sizes, obs, obs_size,
                                               0.5, False, 0.25, False, 0,
                                               float(rs.releases[0].n), 4, H._SIZE_MOVES, use,
                                               rng))
        logt = np.log(theta)
        t_cs = per_call(lambda: count_sweep(z, logt, off, lev, counts, obs, 0.5, False, use, 1,
                                            rng))
        print(f"{regime}: {R} x {T} cells, n = {rs.releases[0].n}, median size "
              f"{np.median(sim['cell_sizes']):.0f}: size_moves {t_sm * 1e6:.1f} us/iteration, "
              f"transfer_moves {t_tr * 1e6:.1f} us/iteration, "
              f"count_sweep {t_cs * 1e6:.1f} us/iteration")
        m2 = HiddenMarkovNB(3, model.n_levels)
        exact = pp.release(sim["records"], q, Laplace(epsilon=5.0), seed=1)
        for name, rel, opts in (("exact sizes", exact, {}),
                                 ("noisy sizes, total fixed", rs, {}),
                                 ("noisy sizes, total free", rs, {"size_total": "free"})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = time.perf_counter()
                pp.infer(m2, rel, method="damcmc", draws=200, warmup=100, chains=1, seed=2,
                         diagnose=False, **opts)
                dt = time.perf_counter() - t
            print(f"  whole damcmc, {name}: {dt / 300 * 1e3:.2f} ms/iteration (300 iterations)")


if __name__ == "__main__":
    main()
