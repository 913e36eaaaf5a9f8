"""Mixing probe (EXPERIMENTS.md §7.1.1): dense 5 x 59 grid, simulate_warlogs("dense", seed=123),
Laplace at eps, K states; a fixed damcmc run of 4 chains; worst R-hat / ESS per parameter
group and per state.

Usage: python benchmarks/hmm_mixing_probe.py K eps warmup draws [z_sampler] [json options]"""
import sys, time, warnings, json
import numpy as np
import privpost as pp
from privpost.mechanisms import Laplace
from privpost.models.hmm import HiddenMarkovNB, simulate_warlogs
from privpost.diagnostics import summarise

K = int(sys.argv[1]); eps = float(sys.argv[2]); warm = int(sys.argv[3]); draws = int(sys.argv[4])
zs = sys.argv[5] if len(sys.argv) > 5 else "collapsed"
extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
data = simulate_warlogs("dense", n_states=3, seed=123)
q, recs = data["query"], data["records"]
rel = pp.release(recs, query=q, mechanism=Laplace(epsilon=eps), seed=7)
model = HiddenMarkovNB(K, q.n_levels)
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    post = pp.infer(model, rel, method="damcmc", draws=draws, warmup=warm, chains=4, seed=11,
                    z_sampler=zs, diagnose=False, **extra)
dt = time.perf_counter() - t0
tab = summarise(post.draws, cheap=True)
groups = {}
for lab, row in tab.items():
    g = lab.split("[")[0]
    w = groups.setdefault(g, [0.0, 1e18, ""])
    if row["r_hat"] == row["r_hat"] and row["r_hat"] > w[0]:
        w[0] = row["r_hat"]; w[2] = lab
    e = min(row["ess_bulk"], row["ess_tail"])
    if e == e: w[1] = min(w[1], e)
print(f"K={K} eps={eps} warm={warm} draws={draws} z={zs} extra={extra} seconds={dt:.1f}")
for g, (r, e, lab) in groups.items():
    print(f"  {g:8s} worst rhat {r:.3f} ({lab})  worst ess {e:.0f}")
cs = post.chain_stats
for k in ("accept_rate", "shift_accept_rate", "state_shift_accept_rate", "shift_indep_accept_rate"):
    if k in cs: print(" ", k, np.round(np.asarray(cs[k]), 3))
z = np.asarray(post.sample_stats["z"]).astype(int)
occ = np.stack([[np.bincount(z[c, -1].ravel(), minlength=K) / z[c, -1].size for c in range(z.shape[0])]])
print("  final occupancies per chain:\n", np.round(np.sort(occ[0], axis=1)[:, ::-1], 3))
# per state label: occupancy (mean over draws and chains) and worst R-hat over its theta entries
occm = np.stack([(z == k).mean(axis=(0, 1, 2, 3)) for k in range(K)])
per = {}
for lab, row in tab.items():
    if lab.startswith("theta"):
        k = int(lab.split("[")[1].split(",")[0])
        per[k] = max(per.get(k, 0.0), row["r_hat"])
for k in np.argsort(-occm):
    print(f"  state {k}: occupancy {occm[k]:.3f}  worst theta rhat {per.get(k, float('nan')):.3f}")
