"""Issue 22, side by side in one run: the four ATUS releases of SOMA's script, privpost's default
damcmc, a Metropolis-within-Gibbs baseline and SOMA itself; plus seed 000's regression default.

    python benchmarks/bench_atus_soma.py [--seed 0] [--soma-dir SOMA] [--soma-python PY]
        [--soma-steps 120] [--mwg-draws 2000] [--main-src OLD/src] [--skip-regression]

Releases (built here from /work/shared/data/atus, ``$PRIVPOST_ATUS_DIR`` or
``--data-dir``, as SOMA's ``atus.py`` builds its releases): the mean over records of
``log max(x_ij, a)`` with ``a = 0.0006944`` (one minute of a day), plus Laplace noise of scale
``-3 log(a) / (n eps)`` on each of the 3 coordinates (``CensoredLogMean(3, a, n)`` with
``Laplace(epsilon=eps)``: the same scale, checked below), eps in {1, 10}, for the two groups:
``female.csv`` (n = 3528; privpost's group_f.csv) and ``male.csv`` (n = 3128; group_m.csv). The
noise is drawn with numpy seed ``--seed`` (SOMA's own noise draws are in its repository; the
statistics agree to 1e-15). NB SOMA's script labels ``--data 2`` "female" but gives it
n = 3128, the size of male.csv, so its "female" run uses the other group's n and scale; here
each release uses its own file's n. Model: Dirichlet(3) with independent Gamma(1, rate 0.1)
priors on alpha (SOMA's prior).

Per release:

* **default**: ``privpost.infer(Dirichlet(3), release, method="damcmc", seed=1)`` with every
  default (4 chains, run until R-hat <= 1.01 and bulk/tail ESS >= 400); wall time of that call
  (Numba compilation excluded by one tiny untimed run first), worst bulk/tail ESS over
  alpha_1..3, worst R-hat, ESS/s = worst ESS / wall;
* **MwG**: the Metropolis-within-Gibbs of Ju et al. (one systematic record sweep with model
  proposals, then one coordinate-wise slice update of alpha: ``Dirichlet(3, slice_steps=1)``,
  ``interweave=False``), compiled driver, 4 chains x ``--mwg-draws`` (+ half as many warm-up);
* **SOMA**: its own code (``benchmarks/_soma_atus.py`` in a subprocess run by ``--soma-python``,
  a Python with PyTorch; skipped when absent): one chain of ``--soma-steps`` iterations (one
  shared-proposal record update + 100 slice updates of alpha each), 20 % warm-up discarded;
  ESS/s = worst bulk ESS of the kept draws / sampling seconds, and the **ceiling** kept draws /
  seconds (the ESS/s it would have if every draw were independent).

Then seed 000's regression (n = 100, eps = 1): worst-coefficient ESS/s of the default damcmc as
called, one chain of 10,000 iterations (benchmarks/bench_defaults.py's measure), seeds 7 and 8,
here and, with ``--main-src``, on another checkout's ``src`` in a subprocess in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

A = 0.0006944
GROUPS = {"female": ("group_f.csv", "female.csv"), "male": ("group_m.csv", "male.csv")}


def load_group(data_dir: Path, group: str) -> np.ndarray:
    """``(n, 3)`` compositions of one group (the file's first column is a row number)."""
    for name in GROUPS[group]:
        f = data_dir / name
        if f.exists():
            x = np.loadtxt(f, delimiter=",", skiprows=1, usecols=(1, 2, 3))
            return x / x.sum(axis=1, keepdims=True)
    raise FileNotFoundError(f"no {' or '.join(GROUPS[group])} in {data_dir}")


def make_release(x: np.ndarray, eps: float, seed: int):
    from privpost.mechanisms import Laplace
    from privpost.queries import CensoredLogMean
    from privpost.releases.release import release

    n = x.shape[0]
    rel = release(x, CensoredLogMean(parts=3, threshold=A, n=n), Laplace(epsilon=eps),
                  seed=np.random.default_rng(seed))
    soma_scale = -3 * math.log(A) / (n * eps)
    assert math.isclose(float(rel.mechanism.scale), soma_scale, rel_tol=1e-12), \
        (rel.mechanism.scale, soma_scale)
    return rel


def worst(draws):
    """(worst bulk/tail ESS over alpha_j, worst split R-hat) of ``(chains, draws, 3)``."""
    from privpost import diagnostics

    tab = diagnostics.summarise({"alpha": np.asarray(draws)}, cheap=True)
    return diagnostics.worst(tab)


def run_default(rel, seed=1):
    import privpost as pp
    from privpost.models import Dirichlet

    t0, c0 = time.perf_counter(), time.process_time()
    post = pp.infer(Dirichlet(3), rel, method="damcmc", seed=seed, progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ess, rh = worst(post.draws["alpha"])
    return dict(wall=wall, cpu=cpu, ess=ess, rhat=rh, draws=post.draws["alpha"].shape[1],
                converged=bool(post.converged), mean=post.draws["alpha"].mean(axis=(0, 1)))


def run_mwg(rel, draws, seed=1):
    from privpost.inference.damcmc import run
    from privpost.models import Dirichlet

    t0, c0 = time.perf_counter(), time.process_time()
    post = run(Dirichlet(3, slice_steps=1), rel, draws=draws, warmup=draws // 2, chains=4,
               seed=seed, progress=False, interweave=False, fast_path=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ess, rh = worst(post.draws["alpha"])
    return dict(wall=wall, cpu=cpu, ess=ess, rhat=rh, draws=draws,
                mean=post.draws["alpha"].mean(axis=(0, 1)))


def run_soma(rel, py, soma_dir, steps, seed=1):
    cmd = [py, str(Path(__file__).with_name("_soma_atus.py")), "--soma-dir", soma_dir,
           "--n", str(rel.n), "--eps", repr(float(rel.mechanism.epsilon)), "--steps", str(steps),
           "--seed", str(seed), "--obs", *[repr(float(v)) for v in rel.observed]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=6 * 3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    d = json.loads(out.stdout)
    a = np.asarray(d["alpha"], dtype=np.float64)
    keep = a[a.shape[0] // 5:]
    secs = float(d["seconds"]) * keep.shape[0] / a.shape[0]    # the kept draws' share
    cpu = float(d["cpu_seconds"]) * keep.shape[0] / a.shape[0]
    from privpost import diagnostics

    ess = min(float(diagnostics.ess_bulk(keep[None, :, j])) for j in range(3))
    return dict(wall=float(d["seconds"]), cpu=cpu, ess=ess, secs_kept=secs, kept=keep.shape[0],
                accept=d["accept"], mean=keep.mean(axis=0))


def soma_available(py, soma_dir) -> str | None:
    if not py or not soma_dir:
        return "no --soma-python / --soma-dir"
    if not (Path(soma_dir) / "atus.py").exists():
        return f"{soma_dir}/atus.py not found"
    try:
        ok = subprocess.run([py, "-c", "import torch, pandas, yaml, tqdm, matplotlib, scipy"],
                            capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{py}: {exc}"
    return None if ok.returncode == 0 else f"{py} lacks torch (or SOMA's other imports)"


def regression(main_src, seeds, iterations=10_000):
    from bench_damcmc import make_problem
    from bench_defaults import one

    model, rel = make_problem(100)
    rows = []
    for s in seeds:
        wall, ess, eps = one(model, rel, iterations, s, {})
        rows.append(("this tree", s, wall, ess, eps))
    if main_src:
        code = ("import sys, json; sys.path.insert(0, %r); "
                "from bench_damcmc import make_problem; from bench_defaults import one; "
                "m, r = make_problem(100); "
                "print(json.dumps([one(m, r, %d, s, {}) for s in %r]))"
                % (os.path.dirname(os.path.abspath(__file__)), iterations, list(seeds)))
        env = dict(os.environ, PYTHONPATH=main_src)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=3600)
        if out.returncode == 0:
            for s, (wall, ess, eps) in zip(seeds, json.loads(out.stdout.strip().splitlines()[-1])):
                rows.append((main_src, s, wall, ess, eps))
        else:
            print(f"(other checkout failed: {out.stderr[-500:]})")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="numpy seed of the release noise")
    ap.add_argument("--data-dir", default=os.environ.get("PRIVPOST_ATUS_DIR",
                                                         "/work/shared/data/atus"))
    ap.add_argument("--soma-dir", default=os.environ.get("SOMA_DIR"))
    ap.add_argument("--soma-python", default=os.environ.get("SOMA_PYTHON"))
    ap.add_argument("--soma-steps", type=int, default=120)
    ap.add_argument("--mwg-draws", type=int, default=2000)
    ap.add_argument("--releases", nargs="+", default=["female:1", "female:10", "male:1",
                                                      "male:10"])
    ap.add_argument("--main-src", default=None)
    ap.add_argument("--skip-regression", action="store_true")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}; load average at start {os.getloadavg()}")
    why = soma_available(a.soma_python, a.soma_dir)
    print(f"SOMA: {'skipped (' + why + ')' if why else a.soma_dir + ' with ' + a.soma_python}")
    rels = {}
    for spec in a.releases:
        g, e = spec.split(":")
        rels[spec] = make_release(load_group(Path(a.data_dir), g), float(e), a.seed)
    # compile once, untimed (the on-disk cache makes later processes start warm too)
    from privpost.inference.damcmc import run
    from privpost.models import Dirichlet

    first = next(iter(rels.values()))
    for kw in (dict(), dict(interweave=False)):
        run(Dirichlet(3), first, draws=3, warmup=2, chains=1, seed=0, progress=False,
            fast_path=True, **kw)
    print("\n| release | n | Laplace scale | sampler | wall s | CPU s | draws/chain | worst ESS | "
          "worst R-hat | worst ESS/s | worst ESS per CPU s | posterior mean alpha |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for spec, rel in rels.items():
        head = f"| {spec} | {rel.n} | {float(rel.mechanism.scale):.3g}"
        d = run_default(rel)
        summary[spec] = {"default": d["ess"] / d["wall"], "default_cpu": d["ess"] / d["cpu"]}
        print(f"{head} | **default damcmc** ({'converged' if d['converged'] else 'NOT converged'})"
              f" | {d['wall']:.1f} | {d['cpu']:.1f} | {d['draws']} | {d['ess']:.0f} | "
              f"{d['rhat']:.4f} | {d['ess'] / d['wall']:.2f} | {d['ess'] / d['cpu']:.2f} | "
              f"{np.round(d['mean'], 3).tolist()} |", flush=True)
        m = run_mwg(rel, a.mwg_draws)
        summary[spec]["mwg"] = m["ess"] / m["wall"]
        summary[spec]["mwg_cpu"] = m["ess"] / m["cpu"]
        print(f"{head} | MwG (centred, 1 slice step) | {m['wall']:.1f} | {m['cpu']:.1f} | "
              f"{m['draws']} | {m['ess']:.0f} | {m['rhat']:.4f} | {m['ess'] / m['wall']:.2f} | "
              f"{m['ess'] / m['cpu']:.2f} | {np.round(m['mean'], 3).tolist()} |", flush=True)
        if why is None:
            s = run_soma(rel, a.soma_python, a.soma_dir, a.soma_steps)
            summary[spec]["soma"] = s["ess"] / s["secs_kept"]
            summary[spec]["soma_ceiling"] = s["kept"] / s["secs_kept"]
            summary[spec]["soma_cpu_ceiling"] = s["kept"] / s["cpu"]
            print(f"{head} | SOMA (1 chain, {a.soma_steps} it., 20 % warm-up; sampling time of "
                  f"the kept draws) | {s['secs_kept']:.1f} | {s['cpu']:.1f} | {s['kept']} | "
                  f"{s['ess']:.0f} | - | {s['ess'] / s['secs_kept']:.3f} (ceiling "
                  f"{s['kept'] / s['secs_kept']:.3f}) | {s['ess'] / s['cpu']:.3f} (ceiling "
                  f"{s['kept'] / s['cpu']:.3f}) | {np.round(s['mean'], 3).tolist()} |", flush=True)
    print("\n| release | default / MwG ESS/s (per CPU s) | default / SOMA ESS/s | default / SOMA "
          "ceiling (per wall s; per CPU s) |")
    print("|---|---|---|---|")
    for spec, r in summary.items():
        soma = (f"{r['default'] / r['soma']:.0f}x | {r['default'] / r['soma_ceiling']:.0f}x; "
                f"{r['default_cpu'] / r['soma_cpu_ceiling']:.0f}x" if "soma" in r else "- | -")
        print(f"| {spec} | {r['default'] / max(r['mwg'], 1e-12):.1f}x "
              f"({r['default_cpu'] / max(r['mwg_cpu'], 1e-12):.1f}x) | {soma} |")
    if not a.skip_regression:
        print("\n| seed 000 regression, default damcmc as called | seed | wall s (10k it.) | "
              "worst ESS | worst ESS/s |")
        print("|---|---|---|---|---|")
        for tree, s, wall, ess, eps in regression(a.main_src, (7, 8)):
            print(f"| {tree} | {s} | {wall:.2f} | {ess:.0f} | {eps:.0f} |", flush=True)
    print(f"\nload average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
