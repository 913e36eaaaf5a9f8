"""Simulation-based calibration of damcmc on §11's regression with declared covariate laws
(EXPERIMENTS §11.2): is the sampler exact for beta_0?

§11 (``coverage_covariates.py``, n = 2000) saw beta_0's 90% interval cover 0.876 over 820 fits
(shared replicates). This runs SBC (Talts et al. 2018) on the same
model / query / covariate-law path: ``LinearRegression(p=2, sigma2=1, tau2=1,
covariates="bernoulli,uniform")`` with ``q ~ Beta(1, 1)`` learned (the default; §11.1's
``learned`` variant, ``coverage_covariates.model("learned")``), ``RegressionStats`` with §11's
bounds x: (0, 1), (0, 4), y: (-10, 10), Laplace epsilon = 0.5, n = 2000 records (§11's
configuration: at 0.7 s of CPU per fit on the compiled driver it needs no shrinking), but
damcmc at a fixed length (``chains=2``, ``warmup=1000``, ``draws=1000``, one core) instead of
run-until-converged, so that every fit costs the same and the draws are a fixed function of the
chain (the stopping rule is not under test here, the kernel is).

Replicate r (streams ``default_rng([1126, r])`` for the truth, records and noise, ``[1126, r, 1]``
for damcmc): ``theta_r = (beta, q) ~`` the model's prior, ``n`` records from the model given
``theta_r`` (``treated ~ Bernoulli(q)``, ``dose ~ U(0, 4)``, ``y = x beta + N(0, 1)``), the
release, damcmc. Each chain's 1000 draws are thinned to every 50th (20 from the first chain, 19 from the
second: about ten integrated autocorrelation times apart at the bulk ESS of 335-460 per 2000
draws measured here), and the rank of the truth among the ``L = 39`` thinned draws is recorded for
every scalar parameter (beta_0, beta_1, beta_2, q). For an exact sampler and independent thinned
draws the rank is uniform on ``{0, ..., 39}`` (40 values), whatever the posterior.

Tests (``--summary``): (1) the coverage statistic of §11 in rank form: the truth outside the
central 90% of the thinned draws, rank in ``{0, 1}`` or ``{38, 39}``: probability exactly 0.1
under H0, tested by the exact two-sided binomial; (2) uniformity: Pearson chi-square of the
ranks in 10 bins of 4 values, its null distribution simulated exactly (10^5 multinomial tables
of the same size) rather than the asymptotic chi-square, and a KS test of the jittered ranks
``(rank + U) / 40`` (exactly Uniform(0, 1) under H0).

Usage::

    nice .venv/bin/python benchmarks/sbc_covariates.py OUT.jsonl START STOP [CPU_SECONDS]
    .venv/bin/python benchmarks/sbc_covariates.py --summary OUT.jsonl [OUT2.jsonl ...]

One JSON line per replicate (resumable). ``CPU_SECONDS`` (default 1200): the process stops
starting replicates once its CPU time passes it.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coverage_covariates import BX, BY, EPS, model as study_model  # noqa: E402

N = 2000
CHAINS, WARMUP, DRAWS = 2, 1000, 1000
PER_CHAIN = (20, 19)                # thinned draws kept from each chain
L = sum(PER_CHAIN)                  # 39: ranks 0..39, 40 values, 10 bins of 4
NAMES = ["beta0", "beta1", "beta2", "q"]


def thinned(post) -> np.ndarray:
    """The ``L`` thinned draws ``(L, 4)`` of (beta_0, beta_1, beta_2, q): ``PER_CHAIN[c]`` draws
    of chain ``c``, every 50th of its ``DRAWS`` draws, ending at the last."""
    b = np.asarray(post.draws["beta"], dtype=float)              # (chains, draws, 3)
    q = np.asarray(post.draws["q_x1"], dtype=float)[..., None]    # (chains, draws, 1)
    a = np.concatenate([b, q], axis=2)
    step = DRAWS // max(PER_CHAIN)
    return np.concatenate([a[c, a.shape[1] - 1 - step * np.arange(k)[::-1]]
                           for c, k in enumerate(PER_CHAIN)])


def fit(r: int) -> dict:
    import privpost as pp
    from privpost.mechanisms import Laplace
    from privpost.queries import RegressionStats

    m = study_model("learned")
    rng = np.random.default_rng([1126, r])
    truth = m.prior_sample(rng)
    x = m.simulate(truth, N, rng)
    rel = pp.release(x, query=RegressionStats(BX, BY), mechanism=Laplace(epsilon=EPS), seed=rng)
    t0, c0 = time.time(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(m, rel, method="damcmc", seed=np.random.default_rng([1126, r, 1]),
                        chains=CHAINS, warmup=WARMUP, draws=DRAWS, cores=1, progress=False)
    th = np.concatenate([np.asarray(truth["beta"], dtype=float).ravel(),
                         [float(truth["q_x1"])]])
    d = thinned(post)
    diag = post.summary()
    return {"rep": r, "truth": th.tolist(), "rank": (d < th).sum(axis=0).tolist(),
            "rhat_max": float(diag["r_hat"].max()),
            "ess_bulk_min": float(diag["ess_bulk"].min()),
            "sd": np.asarray(post.draws["beta"]).reshape(-1, 3).std(axis=0).tolist(),
            "seconds": round(time.time() - t0, 2), "cpu": round(time.process_time() - c0, 2)}


def main(argv):
    out, start, stop = Path(argv[0]), int(argv[1]), int(argv[2])
    budget = float(argv[3]) if len(argv) > 3 else 1200.0
    done = set()
    if out.exists():
        done = {json.loads(line)["rep"] for line in out.read_text().splitlines()}
    for r in range(start, stop):
        if r in done:
            continue
        if time.process_time() > budget:
            print(f"CPU budget {budget:.0f} s spent; stopped before replicate {r}", flush=True)
            break
        rec = fit(r)
        with out.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(r, rec["rank"], rec["rhat_max"], rec["cpu"], flush=True)


def chi2_exact_p(counts: np.ndarray, sims: int = 100_000, seed: int = 0) -> tuple[float, float]:
    """Pearson chi-square of ``counts`` (B,) against equal bins and its p-value under the exact
    multinomial null (``sims`` simulated tables of the same total)."""
    R, B = int(counts.sum()), counts.size
    e = R / B
    stat = float(((counts - e) ** 2 / e).sum())
    sim = np.random.default_rng(seed).multinomial(R, np.full(B, 1.0 / B), size=sims)
    null = ((sim - e) ** 2 / e).sum(axis=1)
    return stat, float((1 + (null >= stat - 1e-9).sum()) / (sims + 1))


def power_out(R: int, p0: float, p1: float, alpha: float = 0.05) -> float:
    """Power of the exact two-sided binomial test of ``P(out) = p0`` at level ``alpha`` against
    ``P(out) = p1``, with ``R`` replicates."""
    from scipy import stats

    k = np.arange(R + 1)
    pmf0 = stats.binom.pmf(k, R, p0)
    # two-sided exact (minimum-likelihood) rejection region
    order = np.argsort(pmf0)
    cum = np.cumsum(pmf0[order])
    reject = np.zeros(R + 1, dtype=bool)
    reject[order[cum <= alpha]] = True
    return float(stats.binom.pmf(k, R, p1)[reject].sum())


def power_chi2(R: int, p_out: float, sims: int = 20_000, seed: int = 1) -> float:
    """Power (level 0.05, exact simulated null) of the 10-bin chi-square against ranks whose
    outer four values {0, 1, L-1, L} hold ``p_out`` in all (evenly), the other 36 the rest: the
    first and last bins (ranks 0-3, 36-39) get ``p_out / 2 + 2 (1 - p_out) / 36`` each."""
    edge = p_out / 2 + 2 * (1 - p_out) / 36
    p1 = np.r_[edge, np.full(8, 4 * (1 - p_out) / 36), edge]
    rng = np.random.default_rng(seed)
    e = R / 10
    null = ((rng.multinomial(R, np.full(10, 0.1), size=sims) - e) ** 2 / e).sum(axis=1)
    crit = np.quantile(null, 0.95)
    alt = ((rng.multinomial(R, p1, size=sims) - e) ** 2 / e).sum(axis=1)
    return float((alt > crit).mean())


def summary(paths):
    from scipy import stats

    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines()]
    rows = sorted({r["rep"]: r for r in rows}.values(), key=lambda r: r["rep"])
    R = len(rows)
    ranks = np.array([r["rank"] for r in rows])                 # (R, 4), values 0..L
    out_vals = np.r_[0:2, L - 1:L + 1]
    p0 = out_vals.size / (L + 1)
    # the §11 effect: coverage 0.876 instead of 0.9, i.e. 1.24 x the mass outside
    p1 = p0 * 0.124 / 0.100
    print(f"R = {R} replicates (reps {rows[0]['rep']}-{rows[-1]['rep']}), n = {N}, L = {L}; "
          f"max R-hat {max(r['rhat_max'] for r in rows):.3f}, min bulk ESS "
          f"{min(r['ess_bulk_min'] for r in rows):.0f}; median CPU "
          f"{np.median([r['cpu'] for r in rows]):.2f} s per fit, total "
          f"{sum(r['cpu'] for r in rows) / 60:.1f} min")
    print(f"outside test: P(rank in {{0,1,{L-1},{L}}}) = {p0:.4f} under H0; power of the "
          f"two-sided exact binomial test (0.05) against {p1:.4f} (the §11 under-coverage, "
          f"0.124 / 0.100 x): {power_out(R, p0, p1):.2f}; of the 10-bin chi-square: "
          f"{power_chi2(R, p1):.2f}")
    for j, nm in enumerate(NAMES):
        rk = ranks[:, j]
        k_out = int(np.isin(rk, out_vals).sum())
        p_bin = stats.binomtest(k_out, R, p0).pvalue
        lo_t, hi_t = int((rk <= 1).sum()), int((rk >= L - 1).sum())
        c10, p10 = chi2_exact_p(np.bincount(rk // ((L + 1) // 10), minlength=10))
        ks = stats.kstest((rk + np.random.default_rng(j).random(R)) / (L + 1), "uniform").pvalue
        print(f"  {nm}: outside {k_out}/{R} = {k_out / R:.4f} (H0 {p0:.4f}; low {lo_t}, high "
              f"{hi_t}), exact binomial p = {p_bin:.3f}; chi-square (10 bins) {c10:.1f}, exact "
              f"p = {p10:.3f}; KS (jittered ranks) p = {ks:.3f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2:])
    else:
        main(sys.argv[1:])
