"""Seed 003 Figs. 3.1-3.3 (extract §1.3): the noise-naive estimator's three checkable claims.

* **Eq. 3.4 / Fig. 3.1** (:func:`mse_check`). The pseudo-marginals ``mu_bar = y / N`` are
  unbiased with per-cell mean squared error ``mu (1 - mu) / N + 2 b^2 / N^2``, ``b`` the Laplace
  scale of the release. The thesis writes ``b = |C| / eps`` (its add/remove value, extract §1.2
  caveat); the release here is replace-one, ``b = 2|C| / eps`` (``query.sensitivity("l1") /
  eps``), so the privacy term is ``8 |C|^2 / (N^2 eps^2)``. The proof: ``n_C(i) ~ Binomial(N,
  mu_C(i))`` (a population of ``N`` i.i.d. records) plus independent noise of variance ``2 b^2``.
  The check compares, for every (N, eps), the measured cell-averaged MSE over ``replicates``
  independent (population, noise) draws with its prediction (the prediction averages
  ``mu (1 - mu)`` over the cells, exactly), with the Monte Carlo standard error of the measured
  mean. It also reports the MSE of the *learned* model marginals of the naive estimator
  (projected, ridge MLE) against the same prediction: the thesis's footnote says they
  "empirically follow Eq. 3.4".
* **Projection helps / Fig. 3.2** (:func:`projection_check`): KL(true || naive) with and without
  the per-clique simplex projection, paired on the same releases, same ridge.
* **lambda must be tuned / Fig. 3.3** (:func:`ridge_check`): KL(true || ridge MLE) over a grid of
  ridge ``lambda`` for the noisy (projected pseudo-marginals) and the true tables, on the same
  populations. Claim: with true tables KL is flat as ``lambda -> 0``; with noisy tables small
  ``lambda`` overfits (KL far above its minimum over the grid).

Populations of ``N`` records are drawn in chunks of at most ``chunk`` records (only their
counts are kept), so ``N = 10^7`` needs no ``N x T`` array.
"""

from __future__ import annotations

import time

import numpy as np

from privpost.inference.mrf_methods import fit_mle, naive_estimate

__all__ = ["population_counts", "mse_check", "projection_check", "ridge_check"]


def population_counts(model, theta, N: int, rng, chunk: int = 200_000) -> np.ndarray:
    """Clique tables ``(d,)`` of ``N`` i.i.d. records from ``p(. | theta)`` (drawn in chunks)."""
    params = model.unflatten(theta)
    out = np.zeros(model.dim)
    left = int(N)
    while left > 0:
        m = min(chunk, left)
        out += model.counts(model.simulate(params, m, rng))
        left -= m
    return out


def _setup(structure, T, K, prior_sd, rng, er_p=0.3):
    from privpost.experiments.cgm_study import make_structure
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.models import CliqueMRF

    cliques = make_structure(structure, T, rng, er_p)
    model = CliqueMRF([K] * T, cliques, prior_sd=prior_sd)
    query = MarginalTables([K] * T, cliques)
    true = np.concatenate([np.log(rng.dirichlet(np.ones(K * K))) for _ in cliques])
    return model, query, true


def _learned_marginals(model, theta):
    return model.marginals(theta)[1]


def mse_check(*, T=10, K=10, structure="chain1", N=(10**3, 10**4, 10**5, 10**6),
              epsilon=(0.1, 1.0, 10.0), replicates=20, learned_replicates=3, prior_sd=3.0,
              seed=0, progress=True) -> list[dict]:
    """Eq. 3.4 check; one row per (N, eps): measured and predicted cell-averaged MSE.

    Rows: ``N, epsilon, b, pred_sampling, pred_privacy, pred, pred_thesis_scale, mse_pseudo,
    se_pseudo, z_pseudo, mse_learned, se_learned, ratio_learned`` (``z = (measured - pred) /
    se``; ``pred_thesis_scale`` uses ``b = |C|/eps``, the thesis's add/remove scale).
    """
    rng = np.random.default_rng(seed)
    model, query, true = _setup(structure, T, K, prior_sd, rng)
    mu = _learned_marginals(model, true)
    lam = 1.0 / (2.0 * prior_sd ** 2)
    C = len(model.cliques)
    rows = []
    for n_rec in N:
        pops = [population_counts(model, true, n_rec, rng) for _ in range(replicates)]
        for eps in epsilon:
            b = query.sensitivity("l1") / eps
            pred_s = float(np.mean(mu * (1 - mu))) / n_rec
            pred_p = 2 * b * b / n_rec ** 2
            t0 = time.perf_counter()
            err_p, err_l = [], []
            for r, n in enumerate(pops):
                y = n + rng.laplace(0.0, b, model.dim)
                err_p.append(float(np.mean((y / n_rec - mu) ** 2)))
                if r < learned_replicates:
                    th, _ = naive_estimate(model, y, float(n_rec), lam)
                    err_l.append(float(np.mean((_learned_marginals(model, th) - mu) ** 2)))
            ep, el = np.array(err_p), np.array(err_l)
            se_p = float(ep.std(ddof=1) / np.sqrt(ep.size))
            se_l = float(el.std(ddof=1) / np.sqrt(el.size)) if el.size > 1 else float("nan")
            mse_l = float(el.mean()) if el.size else float("nan")
            pred = pred_s + pred_p
            rows.append({"N": n_rec, "epsilon": eps, "cliques": C, "b": b,
                         "pred_sampling": pred_s, "pred_privacy": pred_p, "pred": pred,
                         "pred_thesis_scale": pred_s + 2 * (C / eps) ** 2 / n_rec ** 2,
                         "mse_pseudo": float(ep.mean()), "se_pseudo": se_p,
                         "z_pseudo": (float(ep.mean()) - pred) / se_p,
                         "mse_learned": mse_l, "se_learned": se_l,
                         "ratio_learned": mse_l / pred,
                         "replicates": ep.size, "learned_replicates": el.size})
            if progress:
                r_ = rows[-1]
                print(f"[cgm eq3.4] N={n_rec} eps={eps}: pseudo {r_['mse_pseudo']:.3g} +- "
                      f"{se_p:.2g} vs pred {pred:.3g} (z {r_['z_pseudo']:.2f}); learned "
                      f"{r_['mse_learned']:.3g} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return rows


def projection_check(*, T=10, K=5, structure="er", N=(10**3, 10**4, 10**5), epsilon=0.5,
                     populations=3, noise_draws=2, prior_sd=3.0, seed=1,
                     progress=True) -> list[dict]:
    """Fig. 3.2 check: one row per trial with KL of naive with and without projection."""
    rng = np.random.default_rng(seed)
    model, query, true = _setup(structure, T, K, prior_sd, rng)
    lam = 1.0 / (2.0 * prior_sd ** 2)
    b = query.sensitivity("l1") / epsilon
    rows = []
    for n_rec in N:
        for pop in range(populations):
            n = population_counts(model, true, n_rec, rng)
            for draw in range(noise_draws):
                y = n + rng.laplace(0.0, b, model.dim)
                th_p, _ = naive_estimate(model, y, float(n_rec), lam, project=True)
                th_u, _ = naive_estimate(model, y, float(n_rec), lam, project=False)
                rows.append({"N": n_rec, "epsilon": epsilon, "population": pop, "draw": draw,
                             "kl_projected": model.kl(true, th_p),
                             "kl_unprojected": model.kl(true, th_u)})
                if progress:
                    print(f"[cgm fig3.2] N={n_rec} pop={pop} draw={draw}: KL projected "
                          f"{rows[-1]['kl_projected']:.4g}, unprojected "
                          f"{rows[-1]['kl_unprojected']:.4g}", flush=True)
    return rows


def ridge_check(*, T=10, K=5, structure="chain1", N=10**4, epsilon=0.1,
                ridges=(1e-3, 1e-2, 1e-1, 1.0, 10.0, 1e2, 1e3, 1e4), populations=3,
                prior_sd=3.0, seed=2, progress=True) -> list[dict]:
    """Fig. 3.3 check: one row per (population, lambda) with KL for noisy and true tables."""
    rng = np.random.default_rng(seed)
    model, query, true = _setup(structure, T, K, prior_sd, rng)
    b = query.sensitivity("l1") / epsilon
    rows = []
    for pop in range(populations):
        n = population_counts(model, true, N, rng)
        y = n + rng.laplace(0.0, b, model.dim)
        for lam in ridges:
            th_n, _ = naive_estimate(model, y, float(N), lam, project=True)
            th_t = fit_mle(model, n, float(N), lam)
            rows.append({"N": N, "epsilon": epsilon, "population": pop, "ridge": lam,
                         "kl_noisy": model.kl(true, th_n), "kl_true": model.kl(true, th_t)})
            if progress:
                print(f"[cgm fig3.3] pop={pop} lambda={lam:g}: KL noisy "
                      f"{rows[-1]['kl_noisy']:.4g}, true {rows[-1]['kl_true']:.4g}", flush=True)
    return rows
