"""Why the residual-shift move of the count-level MRF chain is idle on §9's K = 3 grid at N > J
(EXPERIMENTS §9.10): a probe, not a timing.

On one grid cell (``cgm_damcmc_grid.cells``, seed 20261126; pair moves capped at 5,000 as in
§9.8) it runs one chain with the residual shift forced on and reports

1. the warm-up's proposal adaptation (``damcmc._IWState``): the adapting step at which the move
   switches to the running covariance (``max(20, 5 dim)``; §9's warm-up gives 2 x 300), the step
   before and after, and the acceptance after the warm-up;
2. from the chain's state after the warm-up, residual-shift proposals ``v' = v + a C z /
   sqrt(dim)`` (``C`` the adapted factor) at fixed sizes ``a``: the fraction with a negative cell,
   the units moved by rounding, and the log acceptance ratio split into its multinomial part
   and its noise part ``log eta``.

    python benchmarks/mrf_residual_shift_probe.py chain3 100000 0.1 [--warmup 300]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def main() -> None:
    from privpost.experiments.cgm_damcmc_grid import FULL, cells
    from privpost.inference._count_table import log_eta, residuals, shift_log_ratio

    ap = argparse.ArgumentParser()
    ap.add_argument("structure")
    ap.add_argument("N", type=int)
    ap.add_argument("epsilon", type=float)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--proposals", type=int, default=60)
    a = ap.parse_args()
    for cell in cells(FULL, 20261126):
        if (cell["structure"], cell["N"], cell["epsilon"]) == (a.structure, a.N, a.epsilon):
            break
    else:
        raise SystemExit("no such cell")
    model, rel = cell["model"], cell["release"]
    law = model.count_latent(rel)
    law.n_pairs = min(law.n_pairs, 5000)
    print(f"J {law.J}, N {a.N}, eps {a.epsilon}: default shift {law.shift!r}")
    law._n_shift_base = 2
    law.set_shift("residual")
    rng = np.random.default_rng(1)
    ch = law.chains([rng], "data")[0]
    iw = ch.iw
    orig, hist = iw.adapt, []

    def adapt(v, alpha):
        sw = iw.switched
        orig(v, alpha)
        if iw.switched and not sw:
            print(f"  switched to the running covariance at adapting step {iw.t}: step "
                  f"{math.exp(hist[-1]):.3g} -> {math.exp(iw.log_s):.3g}, median diag of C "
                  f"{np.median(np.diag(iw.chol)):.3g}")
        hist.append(iw.log_s)
    iw.adapt = adapt
    t0 = time.process_time()
    ch.run(a.warmup, keep=False)
    print(f"  warm-up: {a.warmup} iterations ({time.process_time() - t0:.0f} CPU-s), "
          f"{iw.t} adapting steps, dim {iw.dim} (switch at {max(20, 5 * iw.dim)}); final step "
          f"{math.exp(iw.log_s):.3g}")
    ch.run(100, keep=True)
    print(f"  acceptance over 100 kept iterations: {ch.shift_acc} / {ch.shift_prop}")
    to_free, from_free, _ = law.free
    co = law.coords
    anc = law.last[0]
    for scale in (1e-4, 1e-3, 1e-2, 1e-1, 1.0):
        rows = []
        for _ in range(a.proposals):
            v = to_free(ch.params)
            vp = v + scale * (iw.chol @ rng.standard_normal(iw.dim)) / math.sqrt(iw.dim)
            lp_new = law.log_probs(from_free(ch.params, vp))
            c_new = law.shifted(ch.c, ch.lp, lp_new)
            c_ok = np.maximum(c_new, 0.0)
            residuals(ch.c, law.cell_ptr, law.cell_coord, law.cell_coef, co.s, ch.r)
            residuals(c_ok, law.cell_ptr, law.cell_coord, law.cell_coef, co.s, ch.r_new)
            deta = log_eta(ch.r_new, co.w, co.l2) - log_eta(ch.r, co.w, co.l2)
            la = shift_log_ratio(ch.c, c_ok, ch.lp, lp_new, law.cell_ptr, law.cell_coord,
                                 law.cell_coef, co.s, co.w, co.l2, ch.r, ch.r_new)
            moved = np.abs(c_new - ch.c).sum() - abs(c_new[anc] - ch.c[anc])
            rows.append((np.any(c_new < 0), moved, la - deta, deta,
                         np.linalg.norm(vp - v)))
        r = np.array(rows, dtype=float)
        q = lambda x: f"{np.median(x):.2f} [{np.quantile(x, .1):.2f}, {np.quantile(x, .9):.2f}]"
        print(f"  |dv| {np.median(r[:, 4]):.2g}: P(negative cell) {r[:, 0].mean():.2f}, units "
              f"moved {np.median(r[:, 1]):.0f}, multinomial part {q(r[:, 2])}, "
              f"log eta part {q(r[:, 3])}")
    rd = law.rounded(ch.lp)
    print(f"  cells with c = 0 < round(N p): {int(((ch.c == 0) & (rd > 0)).sum())}; units in "
          f"cells with round(N p) = 0: {ch.c[rd == 0].sum():.0f}")


if __name__ == "__main__":
    main()
