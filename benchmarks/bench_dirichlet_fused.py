"""Issue 22 items 1-3 in one run: the default damcmc on the four ATUS releases of
bench_atus_soma.py and seed 002's DPMCMCp1 at n = 5000 (alpha5, eps = 1.5, one DPss release, as
bench_compositional.py), on this tree and on another checkout's ``src`` (``--main-src``), each
problem run on both trees one after the other (so both see about the same machine load).

    python benchmarks/bench_dirichlet_fused.py --main-src OLD/src [--problems female:1 ...]
        [--seeds 1 2]

Every run is the default as a user calls it (``pp.infer(Dirichlet(D), release, method=...,
seed=...)``: 4 chains, until split R-hat <= 1.01 and bulk/tail ESS >= 400, data start), in a
fresh subprocess per (tree, problem) after one untimed tiny run of the same problem (Numba's
compilation and cache loading excluded). Printed: wall s and CPU s of the ``infer`` call,
draws per chain, worst bulk/tail ESS and split R-hat over alpha, converged or not, ESS per wall
and per CPU second, and the non-centred moves per iteration the run used; then each run's
posterior means of alpha with their MCSE and its warm-up note, and per problem the two trees'
|mean difference| / sqrt(MCSE_1^2 + MCSE_2^2) for every alpha_j.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = r"""
import json, os, sys, time, warnings
from pathlib import Path
import numpy as np
sys.path.insert(0, %(here)r)
warnings.simplefilter("ignore")
import privpost as pp
from privpost.models import Dirichlet
from privpost import diagnostics
spec, seed = %(spec)r, %(seed)d
if spec == "dpmcmc5000":
    from privpost.releases.dpss import dpss_release
    alpha = np.array([2.2, 3.3, 4.4, 5.5, 6.6])
    x = np.random.default_rng(1).dirichlet(alpha, 5000)
    rel = dpss_release(x, 0.25 * 1.5, 0.75 * 1.5, seed=1)
    kw = dict(method="dpmcmc", prior="p1")
    D = 5
else:
    from bench_atus_soma import load_group, make_release
    g, e = spec.split(":")
    rel = make_release(load_group(Path(os.environ.get("PRIVPOST_ATUS_DIR",
                                                      "/work/shared/data/atus")), g), float(e), 0)
    kw = dict(method="damcmc")
    D = 3
pp.infer(Dirichlet(D), rel, seed=0, progress=False, draws=3, warmup=2, chains=1, **kw)
t0, c0 = time.perf_counter(), time.process_time()
post = pp.infer(Dirichlet(D), rel, seed=seed, progress=False, **kw)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
tab = diagnostics.summarise({"alpha": np.asarray(post.draws["alpha"])}, cheap=True)
ess, rh = diagnostics.worst(tab)
full = diagnostics.summarise({"alpha": np.asarray(post.draws["alpha"])})
a = np.asarray(post.draws["alpha"]).reshape(-1, D)
means = a.mean(axis=0).tolist()
mcse = [float(full[k]["mcse_mean"]) for k in full]
warm = [n for n in post.notes if n.startswith("warm-up:")]
import re
moves = [m.group(1) for n in post.notes
         for m in [re.search(r"(\d+) non-centred move\(s\) per iteration", n)] if m]
print(json.dumps(dict(wall=wall, cpu=cpu, ess=float(ess), rhat=float(rh),
                      draws=int(post.draws["alpha"].shape[1]), converged=bool(post.converged),
                      moves=moves[0] if moves else "-", means=means, mcse=mcse,
                      warmup=warm[0] if warm else "-")))
"""


def one(src, spec, seed):
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", _CHILD % dict(here=HERE, spec=spec, seed=seed)],
                         env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--main-src", default=None)
    ap.add_argument("--problems", nargs="+",
                    default=["female:1", "male:1", "female:10", "male:10", "dpmcmc5000"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    a = ap.parse_args(argv)
    print(f"load average at start {os.getloadavg()}")
    print("| problem | tree | wall s | CPU s | draws/chain | worst ESS | worst R-hat | converged "
          "| ESS/s | ESS per CPU s | moves |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    answers, zs = [], []
    trees = [("this tree", None)] + ([(a.main_src, a.main_src)] if a.main_src else [])
    for spec in a.problems:
        for seed in a.seeds:
            runs = []
            for label, src in trees[::-1]:
                r = one(src, spec, seed)
                runs.append(r)
                print(f"| {spec} (seed {seed}) | {label} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                      f"{r['draws']} | {r['ess']:.0f} | {r['rhat']:.4f} | {r['converged']} | "
                      f"{r['ess'] / r['wall']:.1f} | {r['ess'] / r['cpu']:.1f} | {r['moves']} |",
                      flush=True)
                answers.append((spec, seed, label, r))
            if len(runs) == 2:
                # the two trees' posterior means: |difference| / sqrt(MCSE_1^2 + MCSE_2^2)
                z = [abs(m1 - m2) / (s1 * s1 + s2 * s2) ** 0.5 for m1, m2, s1, s2 in
                     zip(runs[0]["means"], runs[1]["means"], runs[0]["mcse"], runs[1]["mcse"])]
                zs.append((spec, seed, z))
    print("\nposterior means of alpha (MCSE) and the warm-up note")
    for spec, seed, label, r in answers:
        print(f"{spec} (seed {seed}) {label}: " + ", ".join(
            f"{m:.4g} ({e:.2g})" for m, e in zip(r["means"], r["mcse"])) + f"; {r['warmup']}")
    for spec, seed, z in zs:
        print(f"{spec} (seed {seed}): |mean difference| / combined MCSE per alpha_j: "
              + ", ".join(f"{v:.2f}" for v in z))
    print(f"\nload average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
