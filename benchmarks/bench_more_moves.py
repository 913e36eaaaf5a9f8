"""ESS per iteration (and per second) with and without the non-centred moves added for issue 13:
NaiveBayesLogLinear, Dirichlet and LinearRegression with hyperprior="niw" (m, S moved too).

    python benchmarks/bench_more_moves.py --model naive-bayes [--n 100] [--eps 1.0]
        [--iterations 3000] [--seeds 1 2 3]
    python benchmarks/bench_more_moves.py --model dirichlet [--n 100] [--eps 1.0] ...
    python benchmarks/bench_more_moves.py --model niw [--n 100] [--eps 1.0] ...

Releases (one per run, numpy seed 0):

* ``naive-bayes``: seed 000's log-linear model, NaiveBayesLogLinear(n_levels=[3]*5, n_classes=5,
  class_alpha=2, feature_alpha=2) with the study's true p (experiments/reproduce.py), n records,
  NaiveBayesCounts with Laplace noise of scale 2K/eps = 10/eps (replace-one L1 sensitivity 2K).
* ``dirichlet``: seed 002's compositional model, Dirichlet(3) (prior Gamma(1, 0.1)), records
  ~ Dirichlet(2.2, 3.3, 4.4), CensoredLogMean(3, threshold 0.01, n) with Laplace noise at eps.
* ``niw``: LinearRegression(p, sigma2 unknown, hyperprior="niw", nu0=p+4) with p = ``--p``
  (default 2), covariates N((1, -1, 0.5)[:p], S), RegressionStats with bounds x in [-5, 5]^p,
  y in [-10, 10], Laplace noise at eps.

Per seed, five configurations on the same release and seed, one chain, 10 % warm-up: centred
generic path (interweave=False, fast_path=False), centred compiled driver (interweave=False,
fast_path=True), the NumPy move (interweave=1, generic path), the compiled move
(interweave=1, fast_path=True; the same chain as the NumPy move) and the compiled default
(interweave='auto' with fast_path=True: four compiled moves per iteration). Configurations on the
compiled driver print "n/a" for a model without it (Dirichlet). ESS = the smallest bulk ESS over every scalar entry of every parameter (for naive Bayes
also over p alone, the quantity seed 000 studies). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

CONFIGS = {
    "centred, generic": dict(interweave=False, fast_path=False),
    "centred, compiled": dict(interweave=False, fast_path=True),
    "NumPy move (1/iteration)": dict(interweave=1, fast_path=False),
    "compiled move (1/iteration)": dict(interweave=1, fast_path=True),
    "compiled default (interweave='auto': 4/iteration)": dict(fast_path=True),
}


def _problem(name, n, eps, p=2):
    from privpost.mechanisms import Laplace
    from privpost.releases.release import Release

    rng = np.random.default_rng(0)
    if name == "naive-bayes":
        from privpost.experiments.reproduce import LOGLINEAR_P
        from privpost.models import NaiveBayesLogLinear
        from privpost.queries import NaiveBayesCounts

        model = NaiveBayesLogLinear(n_levels=[3] * 5, n_classes=5, class_alpha=2.0,
                                    feature_alpha=2.0)
        q = NaiveBayesCounts(n_classes=5, n_levels=[3] * 5)
        truth = model.prior_sample(rng)
        truth["p"] = np.asarray(LOGLINEAR_P) / np.sum(LOGLINEAR_P)
        x = model.simulate(truth, n, rng)
        mech = Laplace(scale=10.0 / eps).calibrate(10.0)
    elif name == "dirichlet":
        from privpost.models import Dirichlet
        from privpost.queries import CensoredLogMean

        model = Dirichlet(3)
        q = CensoredLogMean(3, 0.01, n)
        x = rng.dirichlet([2.2, 3.3, 4.4], n)
        mech = Laplace(scale=q.sensitivity() / eps).calibrate(q.sensitivity())
    elif name == "niw":
        from privpost.models import LinearRegression
        from privpost.queries import RegressionStats

        model = LinearRegression(p=p, hyperprior="niw", nu0=p + 4.0)
        q = RegressionStats(bounds_x=[(-5, 5)] * p, bounds_y=(-10, 10))
        x = model.simulate({"beta": np.array([0.5, 1.0, -1.0, 0.5][:p + 1]), "sigma2": 1.0,
                            "m": np.array([1.0, -1.0, 0.5][:p]),
                            "S": np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.1],
                                           [0.0, 0.1, 1.2]])[:p, :p]}, n, rng)
        mech = Laplace(scale=q.sensitivity() / eps).calibrate(q.sensitivity())
    else:
        raise SystemExit(f"unknown --model {name!r}")
    s = mech.sample(q.statistic(x), seed=1)
    return model, Release(query=q, mechanism=mech, n=n, observed=np.asarray(s, dtype=float))


def _worst_ess(post, names=None):
    from privpost import diagnostics

    worst = np.inf
    for nm, d in post.draws.items():
        if names is not None and nm not in names:
            continue
        d = d.reshape(d.shape[0], d.shape[1], -1)
        for j in range(d.shape[-1]):
            if np.ptp(d[..., j]) > 0:
                worst = min(worst, diagnostics.ess_bulk(d[..., j]))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["naive-bayes", "dirichlet", "niw"], required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--p", type=int, default=2, choices=[1, 2, 3],
                    help="covariates of the niw regression")
    a = ap.parse_args()

    from privpost.errors import ConvergenceWarning, IncompatibleError
    from privpost.inference import damcmc as _damcmc
    from privpost.inference.damcmc import run

    model, rel = _problem(a.model, a.n, a.eps, a.p)
    warmup = a.iterations // 10
    draws = a.iterations - warmup
    p_only = ("p",) if a.model == "naive-bayes" else None
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f} at start; {type(model).__name__} n={a.n} eps={a.eps}; "
          f"{a.iterations} iterations ({warmup} warm-up), 1 chain, seeds {a.seeds}\n")
    extra = " | worst ESS/iter over p" if p_only else ""
    print(f"| configuration | seed | worst ESS/iter | ratio to centred generic{extra} "
          f"| worst ESS/s | wall s |")
    print(f"|---|---|---|---|{'---|' if p_only else ''}---|---|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False,
                fast_path=True, interweave=False)  # compile once, outside the timings
            compiled = True
        except IncompatibleError:
            compiled = False
        compiled_move = compiled and _damcmc._compiled_interweave(model)
        if compiled_move:   # the compiled move's functions too, outside the timings
            run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False,
                fast_path=True, interweave=1)
        for seed in a.seeds:
            base = None
            for label, kw in CONFIGS.items():
                if kw.get("fast_path") is True and not compiled:
                    print(f"| {label} | {seed} | n/a (no compiled query/model) |")
                    continue
                if kw.get("fast_path") is True and kw.get("interweave") is not False \
                        and not compiled_move:
                    print(f"| {label} | {seed} | n/a (no compiled move) |")
                    continue
                t0 = time.perf_counter()
                post = run(model, rel, draws=draws, warmup=warmup, chains=1, seed=seed,
                           progress=False, **kw)
                wall = time.perf_counter() - t0
                per = _worst_ess(post) / draws
                base = per if base is None else base
                col = f" | {_worst_ess(post, p_only) / draws:.4f}" if p_only else ""
                print(f"| {label} | {seed} | {per:.4f} | {per / base:.1f}{col} | "
                      f"{per * draws / wall:.1f} | {wall:.1f} |", flush=True)
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
