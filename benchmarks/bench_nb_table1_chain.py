"""One Table-1 chain (seed 000: N = 100, I = 5, K = 5 ternary features, Dirichlet(2), Laplace
scale 10/eps on the 75 counts) per eps, three ways, CPU seconds and the worst bulk ESS of p:
record-level damcmc at the paper's length (10,000 draws after 5,000, ``fast_path=True``,
``cores=1``: the reproduction's ``--sampler default``), the margins latent at the same length,
and the margins latent at the library's default length (until converged; the reproduction's
``--sampler counts``).

    python benchmarks/bench_nb_table1_chain.py [--reps 2]

``--until``: the library's default run (until converged) on the same releases, one chain and
four chains. ``--split``: only the record path of ``--sampler default`` at Table 1's length (5,000 draws after
5,000: the reproduction's full size), one chain per eps and release, with
its CPU seconds split into the compiled driver (``CompiledChain.advance``), the convergence
check (``diagnostics.summarise`` of every entry, as ``damcmc`` runs it at the end) and the rest
(problem, start, Python around the driver, posterior); plus ``--parts``: the compiled pieces of
one iteration timed alone in Numba loops (update, the 100 proposals, the non-centred move, the
sweep). Run it with ``PYTHONPATH=<another checkout>/src`` to time another version of the library
with the same script (the figures of benchmarks/README.md, "Table 1's record path").
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import privpost as pp
from privpost import diagnostics
from privpost.experiments.reproduce import LOGLINEAR_P, _loglinear_truth
from privpost.models import NaiveBayesLogLinear
from privpost.queries import NaiveBayesCounts
from privpost.mechanisms import Laplace


#: ``privpost reproduce ju2022-loglinear --full --sampler default``'s damcmc rows: the paper's
#: 10,000 iterations (5,000 draws after 5,000 warm-up), compiled driver, its defaults
RECORDS = dict(latent="records", fast_path=True, cores=1, draws=5000, warmup=5000)


def split(model, q, truth, reps: int) -> None:
    """Per-chain CPU of the record path (``--sampler default``), split by where it goes."""
    import hashlib

    from privpost.inference import _damcmc_fast

    spent = [0.0]
    orig = _damcmc_fast.CompiledChain.advance

    def timed(self, n_iter):
        c0 = time.process_time()
        try:
            return orig(self, n_iter)
        finally:
            spent[0] += time.process_time() - c0

    _damcmc_fast.CompiledChain.advance = timed
    rel0 = pp.release(model.simulate(truth, 100, np.random.default_rng(0)), query=q,
                      mechanism=Laplace(epsilon=1.0), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.infer(model, rel0, method="damcmc", chains=1, seed=0, progress=False,
                 **{**RECORDS, "draws": 50, "warmup": 50})
    print("| eps | release | CPU s per chain | driver | convergence check | rest | draws hash |")
    print("|---|---|---|---|---|---|---|")
    tot = np.zeros(4)
    for eps in (0.1, 0.3, 1.0, 3.0, 10.0):
        for r in range(reps):
            x = model.simulate(truth, 100, np.random.default_rng(100 + r))
            rel = pp.release(x, query=q, mechanism=Laplace(epsilon=eps), seed=200 + r)
            spent[0] = 0.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c0 = time.process_time()
                post = pp.infer(model, rel, method="damcmc", chains=1, seed=r, progress=False,
                                **RECORDS)
                cpu = time.process_time() - c0
            c0 = time.process_time()
            diagnostics.summarise(post.draws, cheap=True)
            diag = time.process_time() - c0
            h = hashlib.sha256(b"".join(np.ascontiguousarray(post.draws[k]).tobytes()
                                        for k in sorted(post.draws))).hexdigest()[:12]
            row = np.array([cpu, spent[0], diag, cpu - spent[0] - diag])
            tot += row
            print(f"| {eps:g} | {r} | {row[0]:.3f} | {row[1]:.3f} | {row[2]:.3f} | {row[3]:.3f} "
                  f"| {h} |", flush=True)
    m = tot / (5 * reps)
    print(f"| mean | | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.3f} | |")
    _damcmc_fast.CompiledChain.advance = orig


def until(model, q, truth, reps: int) -> None:
    """The library's default length (run until every entry has split R-hat <= 1.01 and bulk and
    tail ESS >= 400) on the same releases: one chain (Table 1's one chain per release) and the
    default four chains (``cores=1``: CPU seconds of this process), records latent."""
    print("| eps | release | chains, driver | CPU s | draws per chain | worst bulk/tail ESS (all "
          "80 entries) | max R-hat | converged |")
    print("|---|---|---|---|---|---|---|---|")
    for eps in (0.1, 0.3, 1.0, 3.0, 10.0):
        for r in range(reps):
            x = model.simulate(truth, 100, np.random.default_rng(100 + r))
            rel = pp.release(x, query=q, mechanism=Laplace(epsilon=eps), seed=200 + r)
            for chains, opts in ((1, {}), (1, {"fast_path": True}), (4, {})):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    c0 = time.process_time()
                    post = pp.infer(model, rel, method="damcmc", chains=chains, seed=r,
                                    progress=False, cores=1, **opts)
                    cpu = time.process_time() - c0
                ess, rhat = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
                path = "compiled" if any("compiled chain driver" in nt for nt in post.notes) \
                    else "NumPy"
                print(f"| {eps:g} | {r} | {chains}{' (fast_path=True)' if opts else ''}, "
                      f"{path} | {cpu:.3f} | {post.n_draws} | {ess:.0f} | {rhat:.4f} | "
                      f"{post.converged} |", flush=True)


def parts(model, q, truth) -> None:
    """The compiled pieces of one iteration, each timed alone over 15,000 iterations."""
    from numba import njit

    from privpost.inference import damcmc as D
    from privpost.inference._damcmc_fast import pack_params, resolve_fast_path

    x = model.simulate(truth, 100, np.random.default_rng(100))
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=1.0), seed=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="damcmc", chains=1, seed=0, progress=False,
                        **{**RECORDS, "draws": 1000, "warmup": 1000})
    prob = D._Problem(model, rel, proposal=None, sweeps_per_iteration=1, interweave=4)
    fast = resolve_fast_path(prob, True)
    cm = fast.cm
    theta = pack_params({k: v[0, -1] for k, v in post.draws.items()}, prob.shapes)
    rng = np.random.default_rng(1)
    recs = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    N = 15000

    @njit
    def l_update(update, theta, records, rng, N):
        th = theta.copy()
        for _ in range(N):
            update(th, records, rng)

    @njit
    def l_simulate(sim, theta, out, rng, N):
        for _ in range(N):
            sim(theta, out, rng)

    @njit
    def l_exp(out, rng, N):
        for _ in range(N):
            for r in range(out.shape[0]):
                out[r] = -rng.standard_exponential()

    @njit
    def l_innov(innovations, theta, records, u, rng, N):
        for _ in range(N):
            innovations(theta, records, u, rng)

    @njit
    def l_from(from_innovations, theta, u, out, N):
        for _ in range(N):
            from_innovations(theta, u, out)

    @njit
    def l_contrib(contrib, rec, out, N):
        for _ in range(N):
            contrib(rec, out)

    def run(label, f, *args):
        f(*args[:-1], 2)
        c0 = time.process_time()
        f(*args)
        dt = time.process_time() - c0
        print(f"| {label} | {dt / N * 1e6:.2f} |", flush=True)

    print("| piece (one call; an iteration makes the number in brackets) | us per call |")
    print("|---|---|")
    run("conjugate update (1)", l_update, cm.update, theta, recs, rng, N)
    prop = np.zeros((100, 6))
    run("simulate 100 proposals, 600 uniforms (1)", l_simulate, cm.simulate, theta, prop, rng, N)
    run("100 standard exponentials for log u (1)", l_exp, np.zeros(100), rng, N)
    iw = cm.interweave
    u = np.zeros((100, 6))
    run("innovations u | x, theta, 600 uniforms (1)", l_innov, iw.innovations, theta, recs, u,
        rng, N)
    run("from_innovations: records at a moved p (4)", l_from, iw.from_innovations, theta, u,
        prop, N)
    t = np.zeros((100, prob.d))
    run("dense contributions (100, 75) (main: 1 + 4)", l_contrib, fast.contrib, prop, t, N)
    cells = getattr(fast, "cells", None)
    if cells is not None:
        c = np.zeros((100, cells[1]), dtype=np.int64)
        run("cells (100, 5) (this branch: 2 + 4)", l_contrib, cells[0], prop, c, N)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--until", action="store_true")
    a = ap.parse_args()
    model = NaiveBayesLogLinear(n_levels=[3] * 5, n_classes=5, class_alpha=2.0,
                                feature_alpha=2.0)
    q = NaiveBayesCounts(5, [3] * 5)
    truth = _loglinear_truth(model)
    assert np.allclose(truth["p"], LOGLINEAR_P)
    print(f"load {os.getloadavg()[0]:.1f} at start")
    if a.split or a.parts or a.until:
        if a.split:
            split(model, q, truth, a.reps)
        if a.until:
            until(model, q, truth, a.reps)
        if a.parts:
            parts(model, q, truth)
        print(f"load {os.getloadavg()[0]:.1f} at end")
        return
    runs = {"records, 10,000 + 5,000": dict(latent="records", fast_path=True, cores=1,
                                            draws=10000, warmup=5000),
            "margins, 10,000 + 5,000": dict(latent="counts", draws=10000, warmup=5000),
            "margins, until converged": dict(latent="counts")}
    print("| eps | release | sampler | CPU s | draws | worst bulk ESS of p | ESS/CPU-s |")
    print("|---|---|---|---|---|---|---|")
    rel0 = pp.release(model.simulate(truth, 100, np.random.default_rng(0)), query=q,
                      mechanism=Laplace(epsilon=1.0), seed=0)
    for opts in runs.values():     # compile / load caches, untimed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.infer(model, rel0, method="damcmc", chains=1, seed=0, progress=False,
                     **{**opts, "draws": 50, "warmup": 50})
    for eps in (0.1, 0.3, 1.0, 3.0, 10.0):
        for r in range(a.reps):
            x = model.simulate(truth, 100, np.random.default_rng(100 + r))
            rel = pp.release(x, query=q, mechanism=Laplace(epsilon=eps), seed=200 + r)
            for name, opts in runs.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    c0 = time.process_time()
                    post = pp.infer(model, rel, method="damcmc", chains=1, seed=r,
                                    progress=False, **opts)
                    cpu = time.process_time() - c0
                summ = diagnostics.summarise({"p": post.draws["p"]}, cheap=True)
                ess = min(v["ess_bulk"] for v in summ.values())
                print(f"| {eps:g} | {r} | {name} | {cpu:.2f} | {post.n_draws} | {ess:.0f} | "
                      f"{ess / cpu:.0f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
