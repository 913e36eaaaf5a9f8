"""``diagnostics.summarise`` on a K-state HMM posterior: the per-entry loop against the batched
computation (:mod:`privpost._diagnostics_batch`), as a ratio measured in the same run.

    PYTHONPATH=src python benchmarks/bench_diagnostics.py [--states 10] [--chains 4]
        [--draws 2000] [--repeat 3] [--seed 0]

The draws have the shapes of ``HiddenMarkovNB(K, (8, 20, 2, 2, 2))`` (the war-logs HMM of
``experiments/foulds_hmm.py``): pi (C, S, K), A (C, S, K, K), theta1..theta5 (C, S, K, J_d),
i.e. K + K² + 34 K scalar entries (450 at K = 10). Each entry is a prior draw plus a small
AR(1) perturbation (ρ = 0.9, so Geyer's sequence runs to a few dozen lags, as for a sampler).
The *loop* is what ``summarise`` did before: :func:`diagnostics.diagnose` (or the cheap trio
``ess_bulk, ess_tail, rhat``) of each (chains, draws) entry in turn. Both are timed alternately,
``--repeat`` times each, for ``cheap=True`` (what the run-until-converged rounds call) and
``cheap=False`` (``Posterior.summary``); the line gives the medians, their ratio and the largest
relative difference of any number between the two.

``--arviz`` also times arviz-stats 1.x on the same draws (what ``diagnostics`` would call
instead of its own code): ``az.summary(kind="diagnostics")`` plus the tail ESS at the 5 % / 95 %
quantiles (``az.ess(method="tail", prob=(0.05, 0.95))``, the definition privpost uses; the
summary's own tail ESS uses ``ci_prob``), the DataTree built beforehand; and the CPU cost of
``import arviz_stats`` in a fresh interpreter against ``import privpost.diagnostics``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import numpy as np

from privpost import diagnostics as dg
from privpost.models.hmm import HiddenMarkovNB


def loop(draws: dict, cheap: bool) -> dict:
    out = {}
    for label, a in dg._entries(draws):
        if cheap:
            out[label] = {"ess_bulk": dg.ess_bulk(a), "ess_tail": dg.ess_tail(a),
                          "r_hat": dg.rhat(a)}
        else:
            out[label] = dg.diagnose(a)
    return out


def hmm_draws(states: int, chains: int, n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    base = HiddenMarkovNB(states, (8, 20, 2, 2, 2)).prior_sample(rng)
    out = {}
    for name, value in base.items():
        e = rng.standard_normal((chains, n) + np.shape(value))
        for t in range(1, n):
            e[:, t] += 0.9 * e[:, t - 1]
        out[name] = np.asarray(value)[None, None] + 0.01 * e
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=10)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arviz", action="store_true")
    a = ap.parse_args()
    draws = hmm_draws(a.states, a.chains, a.draws, a.seed)
    entries = sum(int(np.prod(v.shape[2:])) for v in draws.values())
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, loadavg "
          f"{open('/proc/loadavg').read().split()[:3]}, numpy {np.__version__}")
    print(f"# K = {a.states}: {entries} scalar entries, {a.chains} chains x {a.draws} draws")
    dg.summarise(draws, cheap=True)      # imports and first-call costs out of the timings
    for cheap in (True, False):
        t_loop, t_batch = [], []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            ref = loop(draws, cheap)
            t_loop.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            new = dg.summarise(draws, cheap=cheap)
            t_batch.append(time.perf_counter() - t0)
        assert list(ref) == list(new)
        diff = max(abs(ref[k][c] - new[k][c]) / max(abs(ref[k][c]), 1e-300)
                   for k in ref for c in ref[k])
        lo, hi = float(np.median(t_loop)), float(np.median(t_batch))
        print(f"cheap={cheap!s:5}  loop {lo:7.3f} s  batched {hi:7.3f} s  ratio {lo / hi:5.1f}x  "
              f"max rel diff {diff:.1e}")


    if a.arviz:
        arviz_stats(draws, a.repeat)


def _import_cpu(module: str, repeat: int) -> float:
    """Median user+sys CPU seconds of ``python -c "import MODULE"`` (fresh interpreters)."""
    code = ("import os, time; t = os.times(); import %s; u = os.times(); "
            "print(u.user - t.user + u.system - t.system)" % module)
    return float(np.median([float(subprocess.run([sys.executable, "-c", code], check=True,
                                                 capture_output=True, text=True).stdout)
                            for _ in range(repeat)]))


def arviz_stats(draws: dict, repeat: int) -> None:
    import warnings

    import arviz_base as azb
    import arviz_stats as azs

    tree = azb.from_dict({"posterior": draws})

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = azs.summary(tree, kind="diagnostics", round_to="none")
            tail = azs.ess(tree, method="tail", prob=(0.05, 0.95))
        return table, tail

    run()
    t_az, t_pp = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        table, tail = run()
        t_az.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ours = dg.summarise(draws)
        t_pp.append(time.perf_counter() - t0)
    diff = max(abs(ours[k][c] - float(table.loc[k, c])) / max(abs(float(table.loc[k, c])), 1e-300)
               for k in ours for c in ("ess_bulk", "r_hat", "mcse_mean", "mcse_sd"))
    lo, hi = float(np.median(t_az)), float(np.median(t_pp))
    print(f"arviz-stats summary + tail ESS {lo:7.3f} s  privpost batched {hi:7.3f} s  ratio "
          f"{lo / hi:5.1f}x  max rel diff (bulk ESS, R-hat, MCSEs) {diff:.1e}")
    print(f"import CPU: arviz_stats {_import_cpu('arviz_stats', repeat):.2f} s, "
          f"privpost.diagnostics {_import_cpu('privpost.diagnostics', repeat):.2f} s")


if __name__ == "__main__":
    main()
