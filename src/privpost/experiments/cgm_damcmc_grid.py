"""§9's K = 3 grid (Bernstein 2017 ch. 3, Fig. 3.4 settings) with count-level ``damcmc`` beside
naive and CGM-EM (issue 21 item 4; EXPERIMENTS §9.3/§9.6).

The cells, populations and releases are generated exactly as
:func:`privpost.experiments.cgm_study.run_study` generates them (same seed -> same structures,
true models, records and noisy tables), one population and one noise draw per cell by default.
Two independent parts, so that they can run as two processes (``--part``) on a shared machine,
each appending one JSON line per cell to its own file:

* ``point``: ``nonprivate``, ``naive`` and ``cgm-em`` (ridge ``1/(2 prior_sd^2)``, KL(true ||
  learned) exactly, :mod:`privpost.inference.mrf_methods` defaults but ``max_em``);
* ``damcmc``: the exact private posterior on the joint count table (``T = 10`` ternary
  variables: ``J = 59,049`` cells; :class:`privpost.inference._count_occupied.OccupiedTable`)
  with the prior of the grid (``N(0, prior_sd^2)`` log-potentials), run until converged under
  a time budget (``max_seconds``). Reported per cell: seconds, largest split R-hat and smallest
  bulk/tail ESS over the log-potentials (the driver's convergence check), KL(true ||
  posterior predictive) (the predictive ``E[p_theta(x) | s]`` over ``draws_used`` thinned draws,
  every joint ``x`` enumerated), KL(true || p at the posterior mean of theta), and the coverage
  of the 50 % / 90 % equal-tailed intervals of the true clique marginals ``mu_C(i)`` (all
  cells of all released tables; one population, so these cells are dependent).

The true models are ``log Dirichlet(1)`` tables, not draws from the ``N(0, 3^2)`` prior, so the
coverage is not nominal by construction; it is a check that the intervals are neither
degenerate nor wildly off. Command (EXPERIMENTS §9.6)::

    python -m privpost.experiments.cgm_damcmc_grid --part damcmc --out DIR [--max-seconds S]
    python -m privpost.experiments.cgm_damcmc_grid --part point --out DIR [--max-em 50]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

__all__ = ["cells", "point_row", "damcmc_row", "FULL"]

#: ``privpost reproduce bernstein2017-cgm --full``'s settings, trials cut to 1 x 1.
FULL = {"T": 10, "K": 3, "structures": ("chain1", "chain3", "er"), "er_p": 0.3,
        "N": (1000, 10000, 100000, 1000000), "epsilon": (0.1, 1.0), "populations": 1,
        "noise_draws": 1, "prior_sd": 3.0}


def cells(settings: dict, seed: int):
    """Yield one dict per (structure, N, population, epsilon, draw) with ``model``, ``query``,
    ``true`` (flat log-potentials), ``counts`` (the true clique tables), ``release``, in
    :func:`~privpost.experiments.cgm_study.run_study`'s order and random streams."""
    from privpost.experiments.cgm_study import structures
    from privpost.mechanisms import Laplace
    from privpost.releases.release import release

    for kind, srng, cliques, model, query, true in structures(settings, seed):
        for N in settings["N"]:
            for pop in range(settings["populations"]):
                x = model.simulate(model.unflatten(true), N, srng)
                counts = model.counts(x)
                rnd = np.concatenate([srng.dirichlet(np.ones(s)) for s in model.sizes])
                for eps in settings["epsilon"]:
                    for draw in range(settings["noise_draws"]):
                        rel = release(x, query=query, mechanism=Laplace(epsilon=eps),
                                      seed=int(srng.integers(2**62)))
                        yield {"structure": kind, "edges": len(cliques), "N": int(N),
                               "epsilon": float(eps), "population": pop, "draw": draw,
                               "model": model, "query": query, "true": true,
                               "counts": counts, "random": rnd, "release": rel}


def point_row(cell: dict, max_em: int = 50) -> dict:
    """``nonprivate``, ``naive``, ``cgm-em`` and ``random`` KL and seconds of one cell."""
    from privpost.inference._gibbs_common import noise_model
    from privpost.inference.mrf_methods import cgm_em, fit_mle, naive_estimate

    model, rel, N = cell["model"], cell["release"], float(cell["N"])
    lam = 1.0 / (2.0 * model.prior_sd ** 2)
    out = {k: cell[k] for k in ("structure", "edges", "N", "epsilon", "population", "draw")}
    t0 = time.perf_counter()
    th_np = fit_mle(model, cell["counts"], N, lam)
    out["nonprivate_kl"], out["nonprivate_s"] = model.kl(cell["true"], th_np), \
        time.perf_counter() - t0
    out["random_kl"] = model.kl(cell["true"], fit_mle(model, N * cell["random"], N, lam))
    y = model.release_tables(rel.query, rel.observed)
    t0 = time.perf_counter()
    th_nv, _ = naive_estimate(model, y, N, lam)
    t_nv = time.perf_counter() - t0
    out["naive_kl"], out["naive_s"] = model.kl(cell["true"], th_nv), t_nv
    t0 = time.perf_counter()
    th_em, info = cgm_em(model, y, N, noise_model(rel), ridge=lam, theta0=th_nv, max_em=max_em)
    out["cgm_em_kl"], out["cgm_em_s"] = model.kl(cell["true"], th_em), \
        time.perf_counter() - t0 + t_nv
    out["em_iterations"] = int(info["em_iterations"])
    out["max_em"] = int(max_em)
    return out


def damcmc_row(cell: dict, *, max_seconds: float | None = None, draws: int | None = None,
               warmup: int = 300, chains: int = 4, n_pairs=None, seed: int = 0,
               draws_used: int = 400, shift: str | None = None) -> dict:
    """Count-level damcmc on one cell (module docstring): ``draws`` kept iterations per chain
    after ``warmup``, or (``draws=None``) until converged within ``max_seconds``; ``n_pairs``: a
    cap on the pair moves per iteration (``None``: the table's default ``min(N, J)``; any number
    keeps the target); ``shift``: the non-centred move, ``"quantile"``, ``"residual"`` or
    ``"none"`` instead of the table's default (every choice keeps the target). ``cpu_s``: the process's CPU seconds of the run (the chains run one after
    the other in this process, so on a loaded machine this, not the wall time, is the cost)."""
    import warnings

    from privpost.diagnostics import summarise, worst
    from privpost.inference import _count_latent

    model, rel = cell["model"], cell["release"]
    out = {k: cell[k] for k in ("structure", "edges", "N", "epsilon", "population", "draw")}
    t0 = time.perf_counter()
    law = model.count_latent(rel)
    out["build_s"] = time.perf_counter() - t0
    if n_pairs is not None:
        law.n_pairs = min(int(law.n_pairs), int(n_pairs))
    if shift is not None:
        law.set_shift(None if shift == "none" else shift)
    out["shift"] = law.shift if law.n_shift else "none"
    out["n_pairs"], out["n_shift"] = int(law.n_pairs), int(law.n_shift)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = _count_latent.run(law, model, rel, draws=draws, warmup=warmup, chains=chains,
                                 seed=seed, progress=False,
                                 max_seconds=max_seconds if draws is None else None)
    out["damcmc_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0
    out["warnings"] = len(caught)
    ess, rh = worst(summarise(post.draws, law.names, cheap=True))
    out["min_ess"], out["max_rhat"], out["converged"] = float(ess), float(rh), \
        bool(getattr(post, "converged", False))
    S = post.draws[law.names[0]].shape[1]
    out["draws_per_chain"] = int(S)
    out["notes"] = [n for n in post.notes if "count table:" in n or "until" in n.lower()
                    or "budget" in n.lower()]
    # thinned draws of theta (flat)
    flat = np.concatenate([post.draws[nm].reshape(chains, S, -1) for nm in model.names],
                          axis=-1)
    keep = np.unique(np.linspace(0, S - 1, max(1, draws_used // chains)).astype(int))
    th = flat[:, keep].reshape(-1, flat.shape[-1])
    lp_true = law.log_probs(model.unflatten(cell["true"]))
    p_true = np.exp(lp_true)
    mix = np.zeros(law.J)
    mus = []
    for t in th:
        mix += np.exp(law.log_probs(model.unflatten(t)))
        mus.append(model.marginals(t)[1])
    mix /= th.shape[0]
    out["kl_predictive"] = float(np.sum(p_true * (lp_true - np.log(mix))))
    out["kl_post_mean"] = float(model.kl(cell["true"], flat.reshape(-1, flat.shape[-1]).mean(0)))
    mus = np.array(mus)
    mu_true = model.marginals(cell["true"])[1]
    for lev in (0.5, 0.9):
        lo, hi = np.quantile(mus, [(1 - lev) / 2, (1 + lev) / 2], axis=0)
        out[f"cover{int(lev * 100)}"] = float(np.mean((lo <= mu_true) & (mu_true <= hi)))
    out["mae_mu"] = float(np.mean(np.abs(mus.mean(0) - mu_true)))
    out["draws_used"] = int(th.shape[0])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("point", "damcmc"), required=True)
    ap.add_argument("--out", required=True, help="directory for <part>.jsonl")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--max-em", type=int, default=50)
    ap.add_argument("--n-pairs", type=int, default=None,
                    help="cap on the pair moves per iteration (default: the table's min(N, J))")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=None,
                    help="kept iterations per chain (default: until converged, --max-seconds)")
    ap.add_argument("--structure", default=None, help="only this structure (chain1/chain3/er)")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--chain-seed", type=int, default=None,
                    help="the chains' seed (default: --seed + the cell's place in its file); "
                         "--seed also draws the cells and releases")
    ap.add_argument("--shift", choices=("quantile", "residual", "none"), default=None,
                    help="the non-centred move instead of the table's default")
    ap.add_argument("--only", default=None, help="structure[,N[,eps]] filter, e.g. chain1,1000")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (f"{a.part}.jsonl" if not (a.structure and a.part == "damcmc")
                  else f"{a.part}-{a.structure}.jsonl")
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["structure"], r["N"], r["epsilon"]))
    want = a.only.split(",") if a.only else []
    for cell in cells(FULL, a.seed):
        key = (cell["structure"], cell["N"], cell["epsilon"])
        if key in done or (a.structure and key[0] != a.structure):
            continue
        if want and (want[0] != key[0] or (len(want) > 1 and int(float(want[1])) != key[1])
                     or (len(want) > 2 and float(want[2]) != key[2])):
            continue
        if a.part == "point":
            row = point_row(cell, a.max_em)
        else:
            row = damcmc_row(cell, max_seconds=a.max_seconds, draws=a.draws, warmup=a.warmup,
                             chains=a.chains, n_pairs=a.n_pairs,
                             seed=a.seed + len(done) if a.chain_seed is None else a.chain_seed,
                             shift=a.shift)
        row["load"] = [round(v, 2) for v in __import__("os").getloadavg()]
        with path.open("a") as fh:
            fh.write(json.dumps(row, default=float) + "\n")
        done.add(key)
        print(json.dumps({k: v for k, v in row.items() if k != "notes"}, default=float),
              flush=True)


if __name__ == "__main__":
    main()
