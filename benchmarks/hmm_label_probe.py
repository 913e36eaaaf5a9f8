"""Label probe (EXPERIMENTS.md §7.1.3): is the dense K = 10 regime's R-hat at eps <= 1 a
diagnostic artefact of the labels, or a sampler that has not mixed?

Data and release: split ``split`` of §7.1.2 (``foulds_hmm_dense.fits``, seed 2016, Laplace at
eps). A fixed ``damcmc`` run (4 chains, ``warmup`` + ``draws`` iterations, the default
relabelling ``relabel="draws"``), then the worst split R-hat / bulk-tail ESS of

* the relabelled parameters (what the run-until-converged rule checks): pi, A, theta;
* label-invariant summaries of every draw (no relabelling involved):
  - ``cell_theta``: the emission distribution ``theta[z_c] (W,)`` of 60 random cells (fixed
    seed);
  - ``occ_sorted``: the state occupancies sorted in decreasing order (top 4);
  - ``n_used``: states holding > 1 % and > 5 % of the cells;
  - ``co``: ``[z_a == z_b]`` for 300 random cell pairs (fixed seed).

Usage: python benchmarks/hmm_label_probe.py K eps warmup draws [split] [json options]"""
import json
import sys
import time
import warnings

import numpy as np

import privpost as pp
from privpost.diagnostics import ess_bulk, ess_tail, rhat, summarise
from privpost.experiments.foulds_hmm_dense import fits

K = int(sys.argv[1]); eps = float(sys.argv[2]); warm = int(sys.argv[3]); draws = int(sys.argv[4])
split = int(sys.argv[5]) if len(sys.argv) > 5 else 0
extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
(_, _, q, recs, heldout, counts, n_test, model, rel, fit_seeds), = fits((split,), (eps,), states=K)
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    post = pp.infer(model, rel, method="damcmc", draws=draws, warmup=warm, chains=4,
                    seed=fit_seeds[3], heldout=heldout, diagnose=False, **extra)
dt = time.perf_counter() - t0


def worst(arrs):
    """(worst R-hat, worst min(bulk, tail) ESS, label) over a dict of (chains, draws) arrays."""
    wr, we, lab = 0.0, np.inf, ""
    for k, a in arrs.items():
        if np.ptp(a) == 0:
            continue
        if (np.ptp(a, axis=1) == 0).all():      # constant in every chain, not across chains
            wr, we, lab = np.inf, min(we, 1.0), k
            continue
        r = rhat(a)
        e = min(ess_bulk(a), ess_tail(a))
        if r > wr:
            wr, lab = r, k
        we = min(we, e)
    return wr, we, lab


tab = summarise(post.draws, cheap=True)
groups = {}
for lab, row in tab.items():
    g = lab.split("[")[0]
    w = groups.setdefault(g, [0.0, np.inf, ""])
    if row["r_hat"] == row["r_hat"] and row["r_hat"] > w[0]:
        w[0], w[2] = row["r_hat"], lab
    e = min(row["ess_bulk"], row["ess_tail"])
    if e == e:
        w[1] = min(w[1], e)
print(f"K={K} eps={eps} split={split} warm={warm} draws={draws} extra={extra} seconds={dt:.1f}")
print("relabelled parameters:")
for g, (r, e, lab) in groups.items():
    print(f"  {g:8s} worst rhat {r:.3f} ({lab})  worst ess {e:.0f}")

z = np.asarray(post.sample_stats["z"]).astype(int)              # (C, S, R, T)
Cn, S = z.shape[:2]
zf = z.reshape(Cn, S, -1)
theta = np.concatenate([np.asarray(post.draws[f"theta{d + 1}"]) for d in range(model.n_features)],
                       axis=-1)                                   # (C, S, K, W)
cell_theta = np.take_along_axis(theta, zf[..., None], axis=2)    # (C, S, cells, W)
occ = np.stack([(zf == k).mean(axis=2) for k in range(K)], axis=-1)   # (C, S, K)
occ_sorted = -np.sort(-occ, axis=-1)
rng = np.random.default_rng(0)
pairs = rng.integers(0, zf.shape[2], size=(300, 2))
pairs = pairs[pairs[:, 0] != pairs[:, 1]]
inv = {}
cells = np.sort(rng.choice(cell_theta.shape[2], size=min(60, cell_theta.shape[2]), replace=False))
inv["cell_theta"] = {f"cell{c},w{w}": cell_theta[:, :, c, w]
                     for c in cells for w in range(cell_theta.shape[3])}
inv["occ_sorted"] = {f"occ[{j}]": occ_sorted[:, :, j] for j in range(min(K, 4))}
inv["n_used"] = {">1%": (occ > 0.01).sum(-1).astype(float), ">5%": (occ > 0.05).sum(-1).astype(float)}
inv["co"] = {f"{a},{b}": (zf[:, :, a] == zf[:, :, b]).astype(float) for a, b in pairs}
print("label-invariant summaries:")
for g, arrs in inv.items():
    r, e, lab = worst(arrs)
    print(f"  {g:10s} worst rhat {r:.3f} ({lab})  worst ess {e:.0f}  ({len(arrs)} quantities)")
print("  per-chain mean occupancies (sorted):")
print(np.round(occ_sorted.mean(axis=1), 3))
print("  per-chain mean states > 1% / > 5%:", np.round(inv["n_used"][">1%"].mean(1), 2),
      np.round(inv["n_used"][">5%"].mean(1), 2))
cs = post.chain_stats
for k in sorted(cs):
    print(" ", k, np.round(np.asarray(cs[k], dtype=float), 3))
# per relabelled state: occupancy (mean over chains and draws) and worst R-hat of its theta
occm = occ.mean(axis=(0, 1))
per = {}
for lab, row in tab.items():
    if lab.startswith("theta"):
        k = int(lab.split("[")[1].split(",")[0])
        per[k] = max(per.get(k, 0.0), row["r_hat"])
print("  relabelled states: occupancy, worst theta R-hat")
for k in np.argsort(-occm):
    print(f"    state {k}: {occm[k]:.4f}  {per.get(k, float('nan')):.3f}")
