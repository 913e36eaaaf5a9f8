"""``method="naive"``: plug the noisy statistic into the conjugate update (noise ignored).

The baseline of Foulds et al. (seed 004 §3.2) and Bernstein & Sheldon (seed 003 §4.4.1, §5.2.2):
treat the released values as if they were the exact sufficient statistic, after projecting them
onto the set of valid statistics (post-processing, no privacy cost), and draw from the
resulting conjugate posterior. It is consistent as ``n -> inf`` but overconfident (and, after
projection, biased) when the noise is not negligible compared with the sampling variability
(``Posterior.exact`` is False). The projections applied are listed in ``Posterior.notes``.

Supported (model, query):

* BetaBernoulli on Sum / Mean of 0/1 records: ``s^ = clip(s_noisy, 0, n)`` (the affine clamping
  map of the query inverted first), ``Beta(a + s^, b + n - s^)``;
* DirichletCategorical on Histogram: counts clipped to ``[0, n]``, ``Dirichlet(alpha + c^)``;
* NaiveBayesLogLinear on NaiveBayesCounts: cell counts clipped to ``[0, n]``; class counts
  estimated by the average over features of the clipped row sums;
* ExponentialGamma / PoissonGamma on Sum / Mean / TruncatedSum: the noisy (clamped or truncated)
  sum, clipped to its valid range, is used as the full sum ``sum x_i`` -- clamping and truncation
  are ignored too;
* CliqueMRF on MarginalTables: the noise-naive MLE of seed 003 §3.2.2 (simplex projection per
  clique, ridge ``lambda``; options ``ridge``, ``project``), a point estimate
  (:mod:`privpost.inference.mrf_methods`);
* LinearRegression on RegressionStats: the noisy normalised statistics mapped back to the
  original scale (clamping ignored), the Gram matrix ``[[X'X, X'y], [y'X, y'y]]`` projected to
  positive semi-definite (its Schur complement's negative eigenvalues clipped, keeping ``n`` and
  the sums), then the conjugate update; NIW covariate hyperparameters are updated from ``X'X``.

Options: ``draws`` (default 1000), ``chains`` (default 4), ``seed``, ``progress`` (a completed bar),
``warmup`` (only used by the two-block Gibbs sampler of a LinearRegression with the
"independent" prior; default 200). That sampler's draws are a Markov chain, checked like every
MCMC method's (:func:`privpost.diagnostics.flag`: ConvergenceWarning, ``NOT CONVERGED`` note,
``converged=False``); the other models' draws are independent and not checked.
"""

from __future__ import annotations

import numpy as np

from privpost._rng import as_generator
from privpost.errors import IncompatibleError
from privpost.inference import expfam, reject_release_set
from privpost.inference._gibbs_common import (Progress, check_sampler_options, make_posterior,
                                              reject_unknown)

__all__ = ["run", "project_statistic"]


def _kind(query) -> str:
    import re

    return re.sub(r"[^a-z0-9]", "", str(getattr(query, "name", type(query).__name__)).lower())


def _bernoulli_count(query, y, n, notes):
    lo, hi = (float(v) for v in query.bounds)
    c0, c1 = min(max(0.0, lo), hi), min(max(1.0, lo), hi)
    val = float(y[0]) * (n if _kind(query) == "mean" else 1.0)
    if c1 == c0:
        raise IncompatibleError("the query's bounds map 0 and 1 to the same value: the release "
                                "carries no information for the naive plug-in")
    s = (val - n * c0) / (c1 - c0)
    notes.append(f"noisy count {s:.6g} clipped to [0, n = {n}]")
    return float(np.clip(s, 0.0, n))


def project_statistic(model, release, notes: list | None = None) -> dict:
    """The projected plug-in statistic the naive posterior uses (``{"s": ...}``; for regression
    ``{"XtX", "Xty", "yty"}`` on the original scale). ``notes`` collects the projections."""
    notes = [] if notes is None else notes
    query = release.query
    kind = _kind(query)
    n = int(release.n)
    y = np.asarray(release.observed, dtype=np.float64)
    fam = expfam.family_for(model)
    if fam is not None and fam.kind == "bernoulli":
        if kind not in ("sum", "mean"):
            raise IncompatibleError(f"naive fits BetaBernoulli to Sum or Mean, not {query.name!r}")
        return {"s": np.array([_bernoulli_count(query, y, n, notes)])}
    if fam is not None and fam.kind == "categorical":
        if kind != "histogram":
            raise IncompatibleError(f"naive fits DirichletCategorical to Histogram, not "
                                    f"{query.name!r}")
        if getattr(release.mechanism, "name", None) == "randomized_response":
            # one report per record: the naive plug-in counts the reports as if they were the
            # true categories (randomized response's flips are ignored)
            k = int(query.categories)
            c = np.bincount(y.astype(np.int64), minlength=k).astype(np.float64)
            notes.append(f"the {n} randomized-response reports are counted as if they were the "
                         "true categories (the response flips are ignored)")
            return {"s": c}
        c = np.clip(y, 0.0, n)
        notes.append(f"noisy counts clipped to [0, n = {n}] ({int(np.sum(c != y))} changed); "
                     "they need not sum to n")
        return {"s": c}
    if fam is not None and fam.kind in ("exponential", "poisson"):
        if kind == "truncatedsum":
            if getattr(query, "transform", "identity") != "identity":
                raise IncompatibleError("naive needs the sum of x, not of log x")
            hi = n * max(float(query.bounds[1]), 0.0)
            notes.append("the truncated sum is used as if it were the full sum (records outside "
                         "the interval are ignored: biased downwards)")
        elif kind in ("sum", "mean"):
            hi = n * max(float(query.bounds[1]), 0.0)
            if kind == "mean":
                y = y * float(query.n)
            notes.append("the clamped sum is used as if it were the full sum (clamping ignored)")
        else:
            raise IncompatibleError(f"naive fits {type(model).__name__} to Sum, Mean or "
                                    f"TruncatedSum, not {query.name!r}")
        s = float(np.clip(y[0], 0.0, hi))
        notes.append(f"noisy sum {y[0]:.6g} clipped to [0, {hi:g}]")
        return {"s": np.array([s])}
    if _is_class(model, "NaiveBayesLogLinear"):
        if kind != "naivebayescounts":
            raise IncompatibleError(f"naive fits NaiveBayesLogLinear to NaiveBayesCounts, not "
                                    f"{query.name!r}")
        I = model.n_classes
        c = np.clip(y, 0.0, n)
        tables = [c[sl].reshape(I, -1) for sl in query.table_slices()]
        rows = np.mean([t.sum(axis=1) for t in tables], axis=0)
        notes.append(f"noisy cell counts clipped to [0, n = {n}]; class counts estimated as the "
                     "average over features of the clipped tables' row sums")
        return {"class": rows, "tables": tables}
    if _is_class(model, "LinearRegression"):
        if kind != "regressionstats":
            raise IncompatibleError(f"naive fits LinearRegression to RegressionStats, not "
                                    f"{query.name!r}")
        from privpost.inference import _gibbs_regression as reg

        ok = bool(reg.is_psd_stat(query, y[None], n, tol=0.0)[0])
        s_t = y[None] if ok else reg.project_stats(query, y[None], n)
        notes.append("noisy statistics mapped to the original scale as if unclamped; the Gram "
                     "matrix [[X'X, X'y], [y'X, y'y]] "
                     + ("was already PSD" if ok else "was projected to PSD (Schur-complement "
                        "eigenvalue clipping keeping n and the sums)"))
        XtX, Xty, yty = reg.original_stats(query, s_t, n, reg.Scaling.from_query(query))
        law = model._cov
        if law.learned:     # what naive does with them, in the covariate note (one per post)
            notes.append(model.covariate_note(how={
                law.param_name(j): (
                    "learned by the plug-in Beta(a + s, b + n - s), s the column's noisy sum "
                    "(X'X's intercept row) clipped to [0, n]" if law.kinds[j] == "bernoulli"
                    else "NOT learned: drawn from this prior (a regression release holds no "
                    "level counts)") for j in law.learned}))
        return {"XtX": 0.5 * (XtX[0] + XtX[0].T), "Xty": Xty[0], "yty": float(yty[0])}
    raise IncompatibleError(f"naive has no conjugate update for {type(model).__name__}; "
                            "supported: BetaBernoulli, DirichletCategorical, ExponentialGamma, "
                            "PoissonGamma, NaiveBayesLogLinear, LinearRegression")


def _is_class(model, name):
    return any(cls.__name__ == name for cls in type(model).__mro__)


def conjugate_draws(model, stat: dict, n: int, draws: int, chains: int, rng, warmup: int = 200):
    """Draws ``{name: (chains, draws, ...)}`` from the conjugate posterior given the plug-in
    statistic (shared with ``nonprivate``)."""
    fam = expfam.family_for(model)
    C = chains * draws
    if fam is not None:
        name = next(iter(model.param_shapes))
        post = fam.posterior(fam.prior(model), np.broadcast_to(stat["s"], (C,) + stat["s"].shape),
                             n)
        th = fam.draw(rng, post)
        return {name: th.reshape((chains, draws) + th.shape[1:])}
    if _is_class(model, "NaiveBayesLogLinear"):
        from privpost.inference.expfam import _dirichlet_draw

        out = {"p": _dirichlet_draw(rng, {"alpha": np.broadcast_to(
            model.class_alpha + stat["class"], (C, model.n_classes))})}
        for k, (nm, tab) in enumerate(zip(model._names, stat["tables"])):
            alpha = model.feature_alpha[k] + tab
            out[nm] = _dirichlet_draw(rng, {"alpha": np.broadcast_to(alpha, (C,) + alpha.shape)})
        return {k: v.reshape((chains, draws) + v.shape[1:]) for k, v in out.items()}
    if _is_class(model, "LinearRegression"):
        from privpost.inference import _gibbs_regression as reg

        prior = reg.RegPrior.from_model(model)
        XtX = np.broadcast_to(stat["XtX"], (chains,) + stat["XtX"].shape)
        Xty = np.broadcast_to(stat["Xty"], (chains,) + stat["Xty"].shape)
        yty = np.full(chains, stat["yty"])
        out = {nm: np.empty((chains, draws) + tuple(sh)) for nm, sh in model.param_shapes.items()}
        beta = np.array([model.prior_sample(rng)["beta"] for _ in range(chains)])
        s2 = np.full(chains, prior.sigma2 if prior.sigma2 is not None else prior.b0)
        burn = warmup if prior.kind == "independent" else 0
        for it in range(burn + draws):
            beta, s2 = reg.draw_beta_sigma2(rng, prior, XtX, Xty, yty, n, beta, s2)
            j = it - burn
            if j >= 0:
                out["beta"][:, j] = beta
                if "sigma2" in out:
                    out["sigma2"][:, j] = s2
        if prior.niw is not None:
            XtXC = np.broadcast_to(stat["XtX"], (C,) + stat["XtX"].shape)
            m, S = reg.draw_niw(rng, prior.niw, XtXC, n)
            out["m"] = m.reshape(chains, draws, -1)
            out["S"] = S.reshape((chains, draws) + S.shape[1:])
        law = model._cov
        if law.learned:     # sums of the covariates: X'X's intercept row (original scale)
            for nm, v in law.plugin_draws(np.asarray(stat["XtX"])[0, 1:], n, C, rng).items():
                out[nm] = v.reshape((chains, draws) + v.shape[1:])
        return out
    raise IncompatibleError(f"no conjugate update for {type(model).__name__}")


def run(model, release, *, draws: int = 1000, chains: int = 4, seed=None, progress: bool = False,
        warmup: int = 200, **options):
    """Naive plug-in posterior (see the module docstring)."""
    if getattr(model, "name", None) == "mrf":     # CliqueMRF: the noise-naive MLE (seed 003 ch. 3)
        from privpost.inference.mrf_methods import run_naive
        return run_naive(model, release, draws=draws, chains=chains, seed=seed,
                         progress=progress, warmup=warmup, **options)
    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    reject_unknown("naive", options)
    if release is None:
        raise IncompatibleError("naive needs a release")
    reject_release_set("naive", release)
    check = getattr(model, "check_query", None)
    if check is not None:
        check(release.query)
    notes = ["naive: the noisy statistic is plugged into the conjugate update as if it were "
             "exact; the privacy noise is ignored, so the posterior is overconfident and biased "
             "when the noise is not negligible (Foulds et al. 2016)"]
    stat = project_statistic(model, release, notes)
    rng = as_generator(seed)
    out = conjugate_draws(model, stat, int(release.n), draws, chains, rng, warmup)
    Progress(1, progress, "naive").update(0)     # the same display as the other methods
    post = make_posterior(out, {}, "naive", model, release, notes, exact=False)
    if not getattr(model, "conjugate", True):    # LinearRegression "independent": Gibbs chains
        from privpost.diagnostics import flag
        flag(post, stacklevel=4)   # warning + note when R-hat > 1.01 or ESS < 400
    return post
