"""Data-driven starting values for the DA-MCMC chains (``damcmc.run(start="data")``, default).

Starting values do not change the target of an MCMC kernel, only how long the chains take to
reach it; but a start far out in the prior can leave the chains stuck. Example (issue 13): a
normal-inverse-gamma model (prior ``mu ~ N(0, sigma2)``) and a released mean age of 53.4 clamped
to ``[18, 95]``: records simulated at a prior draw ``mu ≈ 0`` all clamp to 18, so every record
proposal has the same contribution, the release has no say, and the chains sample the prior
(``mu ≈ 0 ± 1.1``, R-hat 2.2). This module starts each chain where the release puts the mass,
dispersed across chains so that R-hat can still detect disagreement:

1. **re-noised plug-in** (models with a naive conjugate update: BetaBernoulli,
   DirichletCategorical, NaiveBayesLogLinear, PoissonGamma, ExponentialGamma, LinearRegression):
   chain ``c`` draws ``s_c = s_dp + fresh mechanism noise`` (so the starts spread about as much as
   the statistic is uncertain), projects it (:func:`privpost.inference.naive.project_statistic`)
   and draws theta from the resulting conjugate posterior; records are simulated from theta.
2. **shifted records** (one real value per record and a one-dimensional release, e.g. the
   normal models on Sum / Mean): records ``x0 ~ f(. | theta0)`` at a prior draw ``theta0`` are
   shifted by the constant ``c`` that makes ``sum_i t(x0_i + c)`` equal ``s_c`` (bisection; used
   only when it gets within one noise scale), and theta is drawn from ``p(theta | x0 + c)`` by
   the model's own ``update``.
3. **model plug-in** (models with ``plugin_params(query, s, n, rng)``, e.g. Dirichlet on
   CensoredLogMean: Minka's MLE of the re-noised mean logs): theta from the re-noised statistic,
   records simulated from theta.
4. **best simulated** (every other model and query): ``K`` prior draws, ``n`` records simulated at
   each, and the draw whose simulated statistic the (re-noised) release favours most,
   ``max_k log eta(s_c | T(x_k))``, chain by chain (``K`` bounded by a budget of simulated
   records, :data:`SIM_BUDGET`). A crude but model-free start: it only needs the prior and the
   simulator the sampler already uses.
5. otherwise (or when 1-4 fail) the prior, as ``start="prior"``.

A note in the posterior states which start was used.
"""

from __future__ import annotations

import types

import numpy as np

__all__ = ["data_inits"]


def _noisy_stat(problem, rng) -> np.ndarray:
    try:
        s = np.asarray(problem.mech.sample(problem.s_obs, seed=rng), dtype=np.float64)
    except Exception:  # noqa: BLE001 - a start is a heuristic; fall back to the observed value
        return problem.s_obs.copy()
    return s.reshape(problem.s_obs.shape) if np.all(np.isfinite(s)) else problem.s_obs.copy()


def _plugin(problem, rng):
    from privpost.inference import naive

    s = _noisy_stat(problem, rng)
    fake = types.SimpleNamespace(query=problem.query, observed=s, n=problem.n,
                                 mechanism=problem.mech)
    stat = naive.project_statistic(problem.model, fake, [])
    draws = naive.conjugate_draws(problem.model, stat, problem.n, 1, 1, rng, warmup=50)
    return {k: np.asarray(v[0, 0], dtype=np.float64) for k, v in draws.items()}


def _shifted(problem, rng):
    model = problem.model
    theta0 = model.prior_sample(rng)
    x0 = np.asarray(model.simulate(theta0, problem.n, rng), dtype=np.float64)
    target = float(_noisy_stat(problem, rng)[0])

    def f(c):
        return float(problem.t(x0 + c).sum()) - target

    f0 = f(0.0)
    if f0 == 0.0:
        c = 0.0
    else:
        step = max(float(np.std(x0)), 1.0)
        sign = 1.0 if f0 < 0 else -1.0
        lo, hi = 0.0, None
        for _ in range(80):                       # expand until f changes sign
            if (f(sign * step) > 0) == (sign > 0):
                hi = sign * step
                break
            lo = sign * step
            step *= 2.0
        if hi is None:
            return None
        a, b = (lo, hi) if lo < hi else (hi, lo)
        for _ in range(100):
            mid = 0.5 * (a + b)
            if f(mid) < 0:
                a = mid
            else:
                b = mid
        c = 0.5 * (a + b)
    scale = float(np.max(np.asarray(problem.scale, dtype=float)))
    if not abs(f(c)) <= max(scale, 1e-9 * abs(target)):
        return None                                # not monotone enough to hit the release
    x = np.ascontiguousarray(x0 + c, dtype=problem.rec_dtype)
    theta = model.update(theta0, x, rng)
    return {"params": {k: np.asarray(v, dtype=np.float64) for k, v in theta.items()},
            "records": x}


def _model_plugin(problem, rng):
    fn = getattr(problem.model, "plugin_params", None)
    if not callable(fn):
        return None
    params = fn(problem.query, _noisy_stat(problem, rng), problem.n, rng)
    return None if params is None else problem.coerce_params(params)


#: records simulated in all for the best-simulated start of one chain (K = budget // n draws,
#: between 4 and 64)
SIM_BUDGET = 400_000


def _best_simulated(problem, rng):
    p = problem
    K = int(min(64, max(4, SIM_BUDGET // max(p.n, 1))))
    target = _noisy_stat(p, rng)
    best, best_lg = None, -np.inf
    for _ in range(K):
        params = p.model.prior_sample(rng)
        recs = np.asarray(p.model.simulate(params, p.n, rng))
        T = np.ascontiguousarray(p.t(recs).sum(axis=0))
        lg = float(p.log_g(T, target, p.weight))
        if np.isfinite(lg) and lg > best_lg:
            best, best_lg = (params, recs), lg
    if best is None:
        return None
    return {"params": p.coerce_params(best[0]), "records": p.coerce_records(best[1])}


def data_inits(problem, rngs) -> tuple[list[dict] | None, str]:
    """One ``{"params": ..., "records": ...}`` per chain (``records`` may be None: simulated
    from the params by the sampler), and a note; ``(None, note)`` when only the prior applies.

    ``rngs``: one generator per chain, used only for the start (independent of the chains'
    streams)."""
    p = problem
    inits = []
    try:
        for rng in rngs:
            inits.append({"params": p.coerce_params(_plugin(p, rng)), "records": None})
        return inits, ("start: each chain from the naive plug-in posterior of the release "
                       "re-noised with fresh mechanism noise (dispersed starts)")
    except Exception:  # noqa: BLE001 - no plug-in for this model/query: try the next start
        inits = []
    one_real = (p.d == 1 and p.rec_tail == () and np.issubdtype(p.rec_dtype, np.floating))
    if one_real:
        try:
            for rng in rngs:
                st = _shifted(p, rng)
                if st is None:
                    break
                inits.append({"params": p.coerce_params(st["params"]),
                              "records": p.coerce_records(st["records"])})
            else:
                return inits, ("start: each chain's records shifted to reproduce the release "
                               "re-noised with fresh mechanism noise, theta drawn given them "
                               "(dispersed starts)")
        except Exception:  # noqa: BLE001 - fall back to the next start
            inits = []
    inits = []
    try:
        for rng in rngs:
            prm = _model_plugin(p, rng)
            if prm is None:
                break
            inits.append({"params": prm, "records": None})
        else:
            return inits, ("start: each chain from the model's plug-in estimate of the release "
                           "re-noised with fresh mechanism noise (dispersed starts)")
    except Exception:  # noqa: BLE001 - fall back to the next start
        pass
    inits = []
    try:
        for rng in rngs:
            st = _best_simulated(p, rng)
            if st is None:
                break
            inits.append(st)
        else:
            return inits, ("start: each chain from the prior draw (of several, records simulated "
                           "at each) whose simulated statistic best fits the release re-noised "
                           "with fresh mechanism noise (dispersed starts)")
    except Exception:  # noqa: BLE001 - fall back to the prior start
        pass
    return None, "start: theta from the prior, records from the model (no data-driven start " \
                 "for this model and query)"

