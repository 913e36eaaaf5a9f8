"""Priors p1-p5 of seed 002 (Sec. 3.3.1, extract §2.7) for the Dirichlet model.

* ``p1``: the model's own independent Gamma(shape, rate) prior (default Gamma(1, 0.1)); no D1.
* ``p2``: the law of DPBoots run on the D1 release ``S_L(D1, a)`` (scale with ``n1``, bootstrap
  data sets of size ``n1``); available only as draws -> ABC only.
* ``p3``: independent Gamma(v_j, w_j) fitted by maximum likelihood to a p2 sample.
* ``p4``: Gaussian copula with those Gamma marginals; correlation = the correlation of the normal
  scores ``Phi^{-1}(F_Gamma(alpha_j))`` of the p2 sample.
* ``p5``: the DP posterior of alpha given the D1 release under p1 (DPMCMC on D1); draws -> ABC
  only.

p2-p5 are functions of the D1 release only, so using them costs no privacy beyond the release.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from scipy.special import ndtri

from privpost.errors import IncompatibleError

__all__ = ["PRIORS", "PriorSpec", "build_prior", "fit_gamma_copula", "thin_evenly"]

PRIORS = ("p1", "p2", "p3", "p4", "p5")


@dataclass
class PriorSpec:
    """A built prior: ``model`` (a Dirichlet with this prior) for p1/p3/p4, or ``draws``
    ``(m, D)`` for p2/p5 (sampled with replacement by ABC); ``notes`` for the posterior."""

    name: str
    model: object = None
    draws: np.ndarray | None = None
    notes: list = field(default_factory=list)
    #: p5: ``{"r_hat": max split R-hat, "ess": min bulk/tail ESS, "converged": damcmc's
    #: post.converged}`` over the alpha entries of
    #: the D1 chains (``None`` for the other priors)
    diagnostics: dict | None = None

    def sample(self, size: int, rng) -> np.ndarray:
        """``(size, D)`` prior draws."""
        if self.draws is not None:
            return self.draws[rng.integers(0, self.draws.shape[0], size)]
        return np.array([self.model.prior_sample(rng)["alpha"] for _ in range(size)])


def fit_gamma_copula(sample: np.ndarray):
    """Gamma MLE per column (location 0) and the normal-score correlation of ``sample`` (m, D).

    Returns ``(shape (D,), rate (D,), corr (D, D))``.
    """
    sample = np.asarray(sample, dtype=np.float64)
    D = sample.shape[1]
    shape, rate, z = np.empty(D), np.empty(D), np.empty_like(sample)
    for j in range(D):
        v, _, sc = stats.gamma.fit(sample[:, j], floc=0)
        shape[j], rate[j] = v, 1.0 / sc
        u = stats.gamma.cdf(sample[:, j], v, scale=sc)
        z[:, j] = ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    R = np.corrcoef(z, rowvar=False)
    R = 0.5 * (R + R.T)
    w, V = np.linalg.eigh(R)
    if w.min() < 1e-6:   # keep it a proper correlation matrix
        R = V @ np.diag(np.maximum(w, 1e-6)) @ V.T
        dd = np.sqrt(np.diag(R))
        R = R / np.outer(dd, dd)
    np.fill_diagonal(R, 1.0)
    return shape, rate, R


def _with_prior(model, shape, rate, corr):
    from privpost.models.dirichlet import Dirichlet

    h = model.hyperparameters()
    return Dirichlet(model.parts, prior_shape=shape.tolist(), prior_rate=rate.tolist(),
                     prior_corr=None if corr is None else corr.tolist(),
                     slice_steps=h["slice_steps"], slice_width=h["slice_width"],
                     slice_method=h["slice_method"], max_steps_out=h["max_steps_out"])


#: p5's D1 chains, run until converged by default: wall-time budget of the sampling (seconds)
#: and iteration budget (retained draws per chain); see :func:`privpost.inference.damcmc.run`.
P5_MAX_SECONDS = 300.0
P5_MAX_DRAWS = 20_000


def _p5_options(prior_draws: int, user: dict | None, progress: bool = False) -> dict:
    """damcmc options of p5's D1 chains: 4 chains run until converged (``draws=None``: split
    R-hat <= 1.01 and bulk/tail ESS >= 400) after 500 warm-up iterations, within
    ``P5_MAX_SECONDS`` / ``P5_MAX_DRAWS``; ``user`` (``p5_options``) overrides any key. With a
    fixed ``draws`` in ``user`` the warm-up default is the earlier fixed-run one,
    ``min(500, max(50, prior_draws // 4))``, and no budget is passed. ``progress``: damcmc's
    progress bar for the chains."""
    user = dict(user or {})
    if user.get("draws") is not None:
        opts = dict(warmup=min(500, max(50, prior_draws // 4)), chains=4, progress=progress)
    else:
        opts = dict(draws=None, warmup=500, chains=4, progress=progress,
                    max_seconds=P5_MAX_SECONDS, max_draws=P5_MAX_DRAWS)
    opts.update(user)
    return opts


def thin_evenly(draws: np.ndarray, size: int) -> np.ndarray:
    """``size`` draws spread evenly over the pooled chains ``draws`` (chains, n, D): rows
    ``floor(i * C n / size)``, ``i = 0..size-1``, of the chain-major ``(C n, D)`` array -- about
    ``size / C`` per chain, evenly spaced along each; all ``C n`` draws when ``size >= C n``.
    Returns ``(min(size, C n), D)``. Deterministic (no random numbers)."""
    pooled = draws.reshape(-1, draws.shape[-1])
    total = pooled.shape[0]
    if size >= total:
        return pooled
    return pooled[(np.arange(size, dtype=np.int64) * total) // size]


def build_prior(model, dpss, name: str, rng, *, prior_draws: int = 2000,
                p5_options: dict | None = None, progress: bool = False) -> PriorSpec:
    """Build prior ``name`` from the DPss release's D1 part (p2-p5) or the model (p1).

    ``prior_draws``: size of the p2 bootstrap sample (the "large random sample" of the seed,
    size unstated) and of the p5 posterior sample.

    p5: the DPMCMCp1 posterior given the D1 release, from 4 damcmc chains that by default run
    until converged (``draws=None``: split R-hat <= 1.01, bulk and tail ESS >= 400) after 500
    warm-up iterations, within a budget of ``P5_MAX_SECONDS`` (300 s) of sampling and
    ``P5_MAX_DRAWS`` (20,000) draws per chain; ``p5_options`` overrides any damcmc option (a
    fixed ``draws=`` runs that many per chain, warm-up ``min(500, max(50, prior_draws // 4))``
    unless given). The p5 sample (``PriorSpec.draws``, ``(m, D)``) is ``prior_draws`` draws
    thinned evenly from the pooled post-warm-up chains (:func:`thin_evenly`; all of them when
    the chains hold fewer), so it stays a sample of the D1 posterior (the chains' own law, every
    part of every chain equally represented); ABC resamples it with replacement. The chains'
    diagnostics (all their draws) are ``diagnostics``; when they miss the thresholds (a budget
    ran out, or a fixed ``draws`` too short) damcmc's ConvergenceWarning has fired and the
    ``NOT CONVERGED (prior p5: damcmc on D1, ...)`` note is among ``notes``. ``progress``:
    show damcmc's progress bar while the p5 chains run (``p5_options`` may override it).
    """
    if name not in PRIORS:
        raise IncompatibleError(f"prior must be one of {list(PRIORS)}, got {name!r}")
    if name == "p1":
        return PriorSpec("p1", model=model, notes=[
            f"prior p1: the model's independent Gamma(shape={model.prior_shape.tolist()}, "
            f"rate={model.prior_rate.tolist()}) prior"])
    if not dpss.split:
        raise IncompatibleError(
            f"prior {name} is built from the D1 part of a split DPss release, but this release "
            "has no split; make one with `privpost dpss ... --split 0.25` (or split=0.25)")
    from privpost.inference._dpss_fits import dpboots_draws, dpmcmc_posterior

    s1 = dpss.stat1
    if name == "p5":
        opts = _p5_options(prior_draws, p5_options, progress)
        post = dpmcmc_posterior(model, s1, seed=rng, **opts)
        chains = post.draws["alpha"]
        draws = thin_evenly(chains, prior_draws)
        from privpost.diagnostics import summarise

        rows = summarise({"alpha": post.draws["alpha"]}, cheap=True).values()
        diag = {"r_hat": max(r["r_hat"] for r in rows),
                "ess": min(min(r["ess_bulk"], r["ess_tail"]) for r in rows),
                "converged": post.converged}
        # damcmc's own NOT CONVERGED note (it has warned already), saying whose chains these are
        bad = [n.replace("NOT CONVERGED (damcmc,", "NOT CONVERGED (prior p5: damcmc on D1,", 1)
               + ("; for prior p5: p5_options={'draws': None} runs them until converged"
                  if opts.get("draws") is not None else
                  "; for prior p5: raise p5_options max_seconds / max_draws")
               for n in post.notes if n.startswith("NOT CONVERGED")]
        n_c, n_d = chains.shape[0], chains.shape[1]
        how = ("until converged" if opts.get("draws") is None else "fixed draws")
        return PriorSpec("p5", draws=draws, diagnostics=diag, notes=bad + [
            f"prior p5: {draws.shape[0]} DPMCMCp1 draws of the DP posterior given the D1 release "
            f"(n1 = {dpss.n1}), thinned evenly from {n_c} damcmc chains x {n_d} draws "
            f"({how}), resampled with replacement; its chains: max split R-hat "
            f"{diag['r_hat']:.3f}, min bulk/tail ESS {diag['ess']:.0f}"])
    boot, nfail = dpboots_draws(s1.observed, s1.mechanism.scale, dpss.threshold, s1.n,
                                prior_draws, rng)
    notes = []
    if nfail:
        notes.append(f"p2 bootstrap: {nfail} replicate(s) without an MLE were dropped")
    if name == "p2":
        return PriorSpec("p2", draws=boot, notes=notes + [
            f"prior p2: {boot.shape[0]} DPBoots draws from the D1 release (n1 = {dpss.n1}), "
            "resampled with replacement"])
    shape, rate, R = fit_gamma_copula(boot)
    txt = (f"Gamma(shape={np.round(shape, 3).tolist()}, rate={np.round(rate, 3).tolist()}) "
           f"fitted by ML to {boot.shape[0]} DPBoots draws from the D1 release")
    if name == "p3":
        return PriorSpec("p3", model=_with_prior(model, shape, rate, None),
                         notes=notes + [f"prior p3: independent {txt}"])
    return PriorSpec("p4", model=_with_prior(model, shape, rate, R), notes=notes + [
        f"prior p4: Gaussian copula (normal-score correlation {np.round(R, 3).tolist()}) with "
        f"{txt}"])
