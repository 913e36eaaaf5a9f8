"""Coverage of damcmc's 90% intervals for a regression with a binary and a uniform covariate
(issue 23, finding 4): the declared covariate law against the default N(0, I).

Replicate r (seed r): beta ~ N(0, I_3) (the model's prior, tau2 = 1), sigma2 = 1 known,
``treated ~ Bernoulli(0.5)``, ``dose ~ U(0, 4)``, ``y = beta0 + beta1 treated + beta2 dose + e``,
n = 2000 records, RegressionStats with bounds ``x: (0, 1), (0, 4)``, ``y: (-10, 10)``, Laplace
ε = 0.5. Because the truth is drawn from the prior, the exact posterior's 90% central interval
covers it with probability exactly 0.9 (for any n, clamping included: damcmc models it), so the
coverage over R replicates is 0.9 ± sqrt(0.09 / R) up to Monte Carlo error of the intervals.

Variants: ``declared`` (``covariates=bernoulli;uniform`` on the release's bounds, ``q = 0.5``
fixed), ``default`` (no declaration: N(0, I) covariates; the misspecified model of the issue),
``learned`` (``covariates=bernoulli;uniform`` with ``q ~ Beta(1, 1)`` learned, the default since
issue 23 Deliver 3; the data's ``treated ~ Bernoulli(q_r)`` with ``q_r ~ Beta(1, 1)`` drawn from
the prior per replicate, from its own stream ``default_rng([23, r, 1])``, so that the exact
posterior of ``(beta, q)`` covers at exactly 0.9 again; ``q`` is covered too) and ``learned05``
(the learned model on the ``declared`` variant's data, ``q = 0.5``: frequentist coverage at one
``q``, nominal only approximately).

Usage::

    nice .venv/bin/python benchmarks/coverage_covariates.py OUT.jsonl START STOP [variant ...]
    .venv/bin/python benchmarks/coverage_covariates.py --summary OUT.jsonl [OUT2.jsonl ...]

One JSON line per (replicate, variant), appended as it finishes (resumable: done lines are
skipped).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

N, EPS = 2000, 0.5
BX, BY = [(0.0, 1.0), (0.0, 4.0)], (-10.0, 10.0)


def replicate(r: int, q: float = 0.5):
    from privpost.mechanisms import Laplace
    from privpost.queries import RegressionStats
    from privpost.releases.release import release

    rng = np.random.default_rng([23, r])
    beta = rng.standard_normal(3)
    x = np.column_stack([(rng.random(N) < q).astype(float), 4.0 * rng.random(N)])
    y = beta[0] + x @ beta[1:] + rng.standard_normal(N)
    rel = release(np.column_stack([x, y]), RegressionStats(BX, BY), Laplace(epsilon=EPS),
                  seed=rng)
    return beta, rel


def model(variant: str):
    from privpost.models import LinearRegression

    if variant == "declared":
        return LinearRegression(p=2, sigma2=1.0, tau2=1.0, covariates="bernoulli,uniform",
                                covariate_bounds=BX, covariate_probs=[0.5, None])
    if variant in ("learned", "learned05"):
        return LinearRegression(p=2, sigma2=1.0, tau2=1.0, covariates="bernoulli,uniform",
                                covariate_bounds=BX)
    return LinearRegression(p=2, sigma2=1.0, tau2=1.0)


def main(argv):
    import privpost as pp

    out, start, stop = Path(argv[0]), int(argv[1]), int(argv[2])
    variants = argv[3:] or ["declared", "default"]
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            d = json.loads(line)
            done.add((d["rep"], d["variant"]))
    for r in range(start, stop):
        for v in variants:
            if (r, v) in done:
                continue
            q = float(np.random.default_rng([23, r, 1]).beta(1.0, 1.0)) if v == "learned" else 0.5
            beta, rel = replicate(r, q)
            t0 = time.time()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                post = pp.infer(model(v), rel, method="damcmc", seed=r)
            b = post.draws["beta"].reshape(-1, 3)
            lo, hi = np.quantile(b, [0.05, 0.95], axis=0)
            diag = post.summary()
            pnote = [n for n in post.notes if "posterior predictive check" in n]
            rec = {"rep": r, "variant": v, "truth": beta.tolist(), "q": q,
                   "lo": lo.tolist(), "hi": hi.tolist(),
                   "covered": ((lo <= beta) & (beta <= hi)).tolist(),
                   "notes": [n for n in post.notes if n.startswith("covariate model")],
                   "rhat_max": float(diag["r_hat"].max()),
                   "ess_bulk_min": float(diag["ess_bulk"].min()),
                   "ess_tail_min": float(diag["ess_tail"].min()),
                   "predictive": pnote[0] if pnote else None,
                   "fit_warning": any(type(x.message).__name__ == "ModelFitWarning" for x in w),
                   "seconds": round(time.time() - t0, 2)}
            if "q_x1" in post.draws:
                qlo, qhi = np.quantile(post.draws["q_x1"], [0.05, 0.95])
                rec.update(q_lo=float(qlo), q_hi=float(qhi), q_covered=bool(qlo <= q <= qhi))
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(r, v, rec["covered"], rec["rhat_max"], rec["seconds"], flush=True)


def summary(paths):
    """Coverage per variant and coefficient with its binomial standard error."""
    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines()]
    for v in sorted({r["variant"] for r in rows}):
        rs = [r for r in rows if r["variant"] == v]
        cov = np.array([r["covered"] for r in rs], dtype=float)
        R = len(rs)
        se = np.sqrt(0.9 * 0.1 / R)
        print(f"{v}: R = {R}; coverage of the 90% intervals (beta0, beta1, beta2) = "
              f"{', '.join(f'{c:.3f}' for c in cov.mean(0))} (binomial se at 0.9: {se:.3f}); "
              f"all three covered {cov.all(1).mean():.3f} (0.729 if independent); "
              f"max R-hat {max(r['rhat_max'] for r in rs):.4f}, min bulk ESS "
              f"{min(r['ess_bulk_min'] for r in rs):.0f}, min tail ESS "
              f"{min(r['ess_tail_min'] for r in rs):.0f}; ModelFitWarning in "
              f"{sum(r['fit_warning'] for r in rs)} of {R}; median "
              f"{np.median([r['seconds'] for r in rs]):.1f} s per run")
        qc = [r["q_covered"] for r in rs if "q_covered" in r]
        if qc:
            c = float(np.mean(qc))
            print(f"    q (treated's probability, learned): coverage {c:.3f} over {len(qc)} "
                  f"(binomial se at 0.9: {np.sqrt(0.09 / len(qc)):.3f})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2:])
    else:
        main(sys.argv[1:])
