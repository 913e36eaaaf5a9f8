"""EXPERIMENTS.md §7.1: the dense regime of ``foulds2016-hmm`` at its full 5 regions x 59 months
with ``damcmc`` run **until converged** (4 chains, split R-hat <= 1.01 and bulk/tail ESS >= 400
for every entry of pi, A, theta after relabelling, or a stated time budget), beside the Laplace
(``naive``) fit of §7.

The data, held-out cells and releases are those of ``privpost reproduce foulds2016-hmm --full``
with ``seed=2016`` (the run of §7.1): the random stream of
:func:`privpost.experiments.foulds_hmm._heldout_rows` is consumed in the same order (every fit's
seed is drawn whether or not that fit is run), so split ``s``, ε here are meant to be the same
data and release as there (not checked: §7.1 kept only the means over splits; the Laplace fit
is the same call with the same seed, so it repeats whatever §7.1's split had). Only the HMM
(``states`` states) part is fitted; naive Bayes, OPS and non-private are skipped.

Run: ``python -m privpost.experiments.foulds_hmm_dense --splits 0 1 --max-seconds 600
--out out/dense_converged.csv`` (rows appended after every fit).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

__all__ = ["run", "fits", "GRID"]

#: the ε grid of §7 / §7.1 (``foulds2016-hmm``'s full size), in its order
GRID = (0.1, 0.3, 1.0, 3.0, 10.0)


def fits(splits=(0,), epsilons=GRID, *, seed=2016, states=10):
    """The study's data and releases, in its random stream's order: yields ``(split, eps, query,
    records, heldout (R, T) bool, counts (R*T, W), n_test, model, release, fit_seeds)`` for every
    ``split`` in ``splits`` and ``eps`` in ``epsilons`` (``fit_seeds``: Laplace, OPS M = 10,
    OPS M = 100, damcmc). The seeds of the fits not asked for are drawn all the same."""
    bad = [e for e in epsilons if e not in GRID]
    if bad:
        raise ValueError(f"epsilons must be in {GRID}, got {bad}")
    import privpost as pp
    from privpost.experiments.foulds_hmm import split_data
    from privpost.mechanisms import Laplace
    from privpost.models.hmm import HiddenMarkovNB

    rng = np.random.default_rng(seed)
    for split in range(max(splits) + 1):
        q, recs, heldout, counts, n_test = split_data(rng, "dense", 3, 5, 59)
        for K in (1, states):
            # naive Bayes (K = 1) draws its release and fits' seeds too: consume them alike
            rng.integers(2**31)                  # the non-private fit's release
            rng.integers(2**31)                  # ... and its fit
            for eps in GRID:                     # every ε of §7 draws its seeds, run or not
                rel_seed = int(rng.integers(2**31))
                fit_seeds = [int(rng.integers(2**31)) for _ in range(4)]   # laplace, ops x2, damcmc
                if K == 1 or split not in splits or eps not in epsilons:
                    continue
                model = HiddenMarkovNB(K, q.n_levels)
                rel = pp.release(recs, query=q, mechanism=Laplace(epsilon=eps), seed=rel_seed)
                yield split, eps, q, recs, heldout, counts, n_test, model, rel, fit_seeds


def run(splits=(0,), epsilons=(0.1, 0.3, 1.0, 3.0, 10.0), *, max_seconds=600.0, seed=2016,
        states=10, z_sampler="collapsed", out=None, progress=False):
    """Rows (dict per fit) of the converged-damcmc study (module docstring); ``epsilons`` a
    subset of :data:`GRID` (the seeds of the others are drawn all the same, so a subset gets
    the same releases as the whole grid)."""
    import pandas as pd

    import privpost as pp
    from privpost.diagnostics import summarise, worst
    from privpost.experiments.foulds_hmm import _fit, _states_used, heldout_loglik

    rows = []
    for split, eps, q, recs, heldout, counts, n_test, model, rel, fit_seeds in fits(
            splits, epsilons, seed=seed, states=states):
        post, dt = _fit("naive", model, rel, recs, heldout, fit_seeds[0], eps)
        rows.append(dict(split=split, epsilon=eps, method="laplace (200 its)",
                         ll=heldout_loglik(post, model, counts, heldout) / n_test,
                         states=_states_used(post), seconds=dt))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = pp.infer(model, rel, method="damcmc", seed=fit_seeds[3],
                            heldout=heldout, max_seconds=max_seconds,
                            max_draws=100000, z_sampler=z_sampler, progress=progress)
        dt = time.perf_counter() - t0
        ess, rhat = worst(summarise(post.draws, cheap=True))
        cs = post.chain_stats
        rows.append(dict(split=split, epsilon=eps, method="damcmc (until converged)",
                         ll=heldout_loglik(post, model, counts, heldout) / n_test,
                         states=_states_used(post), seconds=dt,
                         converged=bool(post.converged), worst_ess=ess,
                         worst_rhat=rhat, draws=int(post.draws["pi"].shape[1]),
                         shift_accept=float(np.mean(cs.get("shift_accept_rate", np.nan))),
                         indep_accept=float(np.mean(cs.get("shift_indep_accept_rate",
                                                           np.nan)))))
        if out is not None:
            pd.DataFrame(rows).to_csv(out, index=False)
        if progress:
            print(rows[-2], rows[-1], flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--splits", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilon", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0, 10.0])
    ap.add_argument("--max-seconds", type=float, default=600.0)
    ap.add_argument("--states", type=int, default=10)
    ap.add_argument("--z-sampler", default="collapsed")
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    run(tuple(a.splits), tuple(a.epsilon), max_seconds=a.max_seconds, seed=a.seed,
        states=a.states, z_sampler=a.z_sampler, out=a.out, progress=True)


if __name__ == "__main__":
    main()
