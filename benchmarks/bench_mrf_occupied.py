"""CPU seconds per iteration of the count-level MRF chain on §9's K = 3 grid (J = 3^10 joint
cells): uniform pair moves (``_count_table.pair_sweep``, J per iteration, the previous default)
against pair moves among occupied cells (``_count_occupied.occupied_sweep``, min(N, J) per
iteration), and the other pieces of an iteration (theta update, log cell probabilities, two
residual-shift moves, and the law's default non-centred moves: the compiled quantile shift
below ``16 J`` units, ``QUANTILE_WORK / (N + J)`` of them, since the MRF theta kernel was
compiled). CPU time (``time.process_time``), so the figures do not depend on the
machine's load; the median over ``--reps`` iterations after one warm iteration.

    python benchmarks/bench_mrf_occupied.py [--structures chain1,chain3,er] [--reps 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    from privpost.experiments.cgm_study import make_structure
    from privpost.inference._count_occupied import occupied_sweep
    from privpost.inference._count_table import pair_sweep
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.mechanisms import Laplace
    from privpost.models import CliqueMRF
    from privpost.releases.release import release

    ap = argparse.ArgumentParser()
    ap.add_argument("--structures", default="chain1,chain3,er")
    ap.add_argument("--N", default="1000,10000,100000,1000000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=1.0)
    a = ap.parse_args()
    print("| structure | N | occupied cells | uniform sweep (J moves) ms | occupied sweep "
          "(min(N, J) moves) ms | ratio | theta update ms | log p ms | 2 shift moves ms | "
          "default shift moves ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in a.structures.split(","):
        srng = np.random.default_rng(1)
        cl = make_structure(kind, 10, srng)
        model = CliqueMRF([3] * 10, cl, prior_sd=3.0)
        q = MarginalTables([3] * 10, cl)
        true = np.concatenate([np.log(srng.dirichlet(np.ones(9))) for _ in cl])
        for N in (int(float(v)) for v in a.N.split(",")):
            x = model.simulate(model.unflatten(true), N, srng)
            rel = release(x, query=q, mechanism=Laplace(epsilon=a.epsilon), seed=3)
            law = model.count_latent(rel)
            ch = law.chains([np.random.default_rng(5)], "data")[0]
            co = law.coords
            occ_n = int((ch.c > 0).sum())
            t = {"uni": [], "occ": [], "upd": [], "lp": [], "shift": [], "dflt": []}
            for rep in range(a.reps + 1):
                c0 = ch.c.copy()
                p0 = time.process_time()
                # the engine's sweep with every pair uniform (unit_frac 0), J moves
                pair_sweep(c0, ch.lp, law.J, 0.0, law.eligible, law.el_pos, ch.fen,
                           law.cell_grp, law.grp_ptr, law.grp_cells, law.cell_ptr,
                           law.cell_coord, law.cell_coef, co.s, co.w, co.l2, ch.r, ch.b_idx,
                           ch.b_r, ch.b_v, ch.b_w, ch.b_l2, ch.rng)
                p1 = time.process_time()
                occupied_sweep(ch.c, ch.lp, law.n_pairs, law.cell_ptr, law.cell_coord,
                               law.cell_coef, co.s, co.w, co.l2, ch.r, ch.occ, ch.pos,
                               ch.b_idx, ch.b_r, ch.b_v, ch.b_w, ch.b_l2, True, ch.rng)
                p2 = time.process_time()
                ch.params = law.update(ch.params, ch.c, ch.rng)
                p3 = time.process_time()
                ch.lp = np.ascontiguousarray(law.log_probs(ch.params))
                p4 = time.process_time()
                if ch.iw is not None:
                    ch._shift(True)
                p5 = time.process_time()
                if ch.iw is not None:                 # the chain's own non-centred moves
                    if law.shift == "residual":
                        ch._shift(True)
                    elif getattr(ch, "ll", None) is not None:
                        ch._quantile_shift_compiled(True)
                    else:
                        ch._quantile_shift(True)
                p6 = time.process_time()
                if rep:
                    for k, v in zip(t, (p1 - p0, p2 - p1, p3 - p2, p4 - p3, p5 - p4, p6 - p5)):
                        t[k].append(1e3 * v)
            m = {k: float(np.median(v)) for k, v in t.items()}
            print(f"| {kind} | {N:,} | {occ_n:,} | {m['uni']:.1f} | {m['occ']:.1f} "
                  f"({law.n_pairs:,} moves) | {m['uni'] / max(m['occ'], 1e-9):.1f}x | "
                  f"{m['upd']:.2f} | {m['lp']:.2f} | {m['shift']:.1f} | {m['dflt']:.2f} "
                  f"({law.n_shift} {law.shift}) |", flush=True)


if __name__ == "__main__":
    main()
