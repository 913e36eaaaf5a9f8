"""``method="gibbs-ss"``: sufficient-statistic Gibbs sampling (Bernstein & Sheldon, seed 003).

The latent quantity is the confidential *sufficient statistic* ``s`` rather than the ``n``
records: its law given the parameters is replaced by a normal (CLT), Laplace noise is written as a
scale mixture of normals (latent variances ``omega``), and Gibbs sampling alternates
``s | theta, omega, y`` (Gaussian), ``omega | s, y`` (inverse Gaussian) and ``theta | s``
(conjugate). The cost per iteration does not depend on ``n``.

It is an **approximation** (``Posterior.exact`` is False): the CLT replaces the exact law of
``s``; it is accurate when ``n`` is large enough for the statistic to be near normal (it is
restricted to the valid range of ``s``, so small ``n`` degrades gracefully). For an exact
sampler use ``method="damcmc"``. Measured (``EXPERIMENTS.md`` §4, 200 simulation-based
calibration replicates): calibrated for the binomial and the multinomial from n = 10, and for
the truncated exponential from n = 100, but not at n = 10 (KS 0.14, p ≈ 0.001, where ``damcmc``
on the same releases gives 0.08); below :data:`SMALL_N_TRUNCATED` records a truncated-sum
posterior carries a note advising ``damcmc``.

Supported models and releases
-----------------------------
===========================  =========================================  ======================
model                        query                                      mechanisms
===========================  =========================================  ======================
BetaBernoulli                Sum(bounds) / Mean(bounds, n) of 0/1       laplace, gaussian,
DirichletCategorical         Histogram(K)                               discrete_laplace,
ExponentialGamma             TruncatedSum(bounds, "identity")           discrete_gaussian
PoissonGamma                 TruncatedSum(bounds, "identity")           (discrete noise is
LinearRegression             RegressionStats, or a ReleaseSet of        modelled as continuous)
                             RegressionStats + CovariateMoments
===========================  =========================================  ======================

gibbs-ss is the only method that takes a :class:`~privpost.ReleaseSet`: Gibbs-SS-Noisy's
RegressionStats release and CovariateMoments release of the same records
(:func:`privpost.inference._gibbs_regression.release_with_moments`), used with
``covariate_moments="noisy"``. The moment release's noise is not modelled (as in the thesis).

Algorithm and deviations from the thesis
----------------------------------------
* Beta-binomial: Bernstein & Sheldon's Algorithm 3 exactly (truncated normal on ``[0, n]``,
  inverse-Gaussian mixture variances, conjugate Beta), in a compiled loop (~10^6 iterations/s).
* Categorical: Algorithm 3 on the first K-1 counts, with all K noisy counts conditioned on
  (the K-th is ``n - sum`` plus its own noise); the truncated normal on the count polytope is
  drawn by rejection, falling back to an exact coordinate-wise Gibbs sweep (never hangs).
* Truncated sums: the tail sums are augmented as in the thesis, but drawn *jointly* with the
  released centre sum (random-sum CLT with the cross-covariances; so their total has the right
  variance and equals the statistic used for theta), and each iteration starts with a
  Metropolis step for theta with the latent sums integrated out: the thesis's scheme alone
  crawls when the unobserved tails hold much mass, and cannot move between the two branches a
  truncated sum can leave (two rates with the same expected truncated sum).
* Regression: Algorithm 7 (CLT with the corrected covariance, PSD-valid statistics,
  NIG/NIW conjugate updates) preceded by an adaptive random-walk Metropolis step for
  ``(beta, log sigma2)`` under the CLT with the statistic integrated out (``collapsed=True``,
  the default): when the privacy noise dominates the sampling variability the Gibbs steps alone
  move by the *conditional* posterior width each iteration and mix very slowly. Its CLT ignores
  the query's clamping, as the thesis does: measured in ``EXPERIMENTS.md`` section 5, the 95%
  coverage of the intercept falls to 0.57 (n = 100) and 0.17 (n = 1000) in data sets where over
  90% of the responses are clamped, while it is 0.96-1.00 where at most 10% are. Choose bounds
  that clamp few records, or use ``damcmc``, which models clamping exactly.

The collapsed steps target the CLT model's marginal; the conjugate steps use the exact
conditional given the latent statistic (the thesis's "two views"). Both are approximations of
the same posterior that agree as n grows.

Options
-------
draws, warmup, chains : int
    Retained iterations per chain, discarded warm-up iterations, number of chains (default
    1000, 1000, 4). All chains advance together (vectorised).
seed : None, int or Generator
progress : bool
    Print progress to stderr.
covariate_moments : {"prior", "update", "noisy"} (linear regression only)
    Source of the covariate moments the CLT needs (seed 003 §5.2.4.4); see
    :mod:`privpost.inference._gibbs_regression`. Default: ``"update"`` when the model has a
    normal-inverse-Wishart covariate hyperprior; otherwise ``"noisy"`` when the release is a
    ReleaseSet with a CovariateMoments release, else ``"prior"`` (the model's fixed covariate
    law). ``"noisy"`` needs that ReleaseSet (below).
max_tries : int (linear regression only)
    Rejection attempts for a positive semi-definite statistic before projecting (default 10).
collapsed : bool (linear regression only)
    Add the collapsed Metropolis step (default True); False runs the thesis's Algorithm 7 alone.

Returns
-------
Posterior
    Draws under the model's parameter names; ``sample_stats`` holds ``stat`` (the latent
    sufficient statistic used for the parameter update) and ``fallback`` / ``projected`` flags.
"""

from __future__ import annotations

from privpost.errors import IncompatibleError
from privpost.diagnostics import flag as flag_convergence
from privpost.inference._gibbs_common import (check_sampler_options, make_posterior,
                                              reject_unknown)

__all__ = ["run"]


#: Below this many records a truncated-sum (exponential / Poisson) gibbs-ss posterior carries a
#: note advising the exact ``damcmc``: its random-sum CLT was measurably miscalibrated at
#: n = 10 and calibrated at n = 100 (EXPERIMENTS.md section 4).
SMALL_N_TRUNCATED = 50


def _is_regression(model) -> bool:
    return any(cls.__name__ == "LinearRegression" for cls in type(model).__mro__)


def run(model, release, *, draws: int = 1000, warmup: int = 1000, chains: int = 4, seed=None,
        progress: bool = False, **options):
    """Sufficient-statistic Gibbs posterior of ``model``'s parameters given ``release``.

    See the module docstring for the supported combinations and options.
    """
    from privpost.releases.release import ReleaseSet

    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    if release is None:
        raise IncompatibleError("gibbs-ss needs a release")
    if "records" in options:
        raise IncompatibleError("gibbs-ss is noise-aware inference from the release alone; it "
                                "takes no records (use method='nonprivate' for that)")
    is_set = isinstance(release, ReleaseSet)
    if is_set and not _is_regression(model):
        raise IncompatibleError(
            f"gibbs-ss takes a ReleaseSet only for LinearRegression (a RegressionStats and a "
            f"CovariateMoments release, covariate_moments='noisy'); {type(model).__name__} "
            "needs a single Release")
    check = getattr(model, "check_query", None)
    if check is not None:
        if is_set:
            from privpost.inference._gibbs_regression import split_release_set

            check(split_release_set(release)[0].query)
        else:
            check(release.query)
    if _is_regression(model):
        from privpost.inference import _gibbs_regression as reg

        post = reg.run(model, release, draws=draws, warmup=warmup, chains=chains, seed=seed,
                       progress=progress, **options)
        flag_convergence(post)   # warning + note when R-hat > 1.01 or ESS < 400
        return post

    from privpost.inference import _gibbs_expfam as gx

    reject_unknown("gibbs-ss", {k: v for k, v in options.items()
                                if not (k == "covariate_moments" and v is None)})
    prob = gx.build_problem(model, release)
    theta, stats = gx.sample(prob, draws=draws, warmup=warmup, chains=chains, seed=seed,
                             progress=progress)
    notes = [
        "gibbs-ss is approximate: the sufficient statistic's law given the parameters is "
        "replaced by its CLT normal, restricted to the statistic's valid range "
        "(Bernstein & Sheldon 2018)",
    ]
    if prob.noise.kind == "laplace":
        notes.append("Laplace noise handled exactly by its normal scale mixture "
                     "(latent variances updated from their inverse-Gaussian conditional)")
    else:
        notes.append("Gaussian noise conditioned on directly")
    if prob.noise.approximate:
        notes.append(prob.noise.approximate)
    notes.extend(prob.notes)
    if prob.segment_labels and prob.n < SMALL_N_TRUNCATED:
        notes.append(f"n = {prob.n} is small for the CLT of a truncated random sum: in a "
                     "calibration study at n = 10 gibbs-ss was miscalibrated (KS 0.14 over 200 "
                     "replicates) where damcmc on the same releases was not (EXPERIMENTS.md "
                     "section 4); prefer method='damcmc', which is exact and cheap at this n")
    if prob.segment_labels:
        notes.append("truncated sum: each iteration starts with a Metropolis step for the "
                     "parameter under the CLT with the latent sums integrated out (the thesis's "
                     "conjugate step alone crawls when the unobserved tails carry much mass); a "
                     "truncated sum alone can leave the parameter bimodal (two rates give the "
                     "same expected truncated sum), which the prior must resolve")
    nfb = int(stats["fallback"].sum())
    if nfb:
        notes.append(f"{nfb} statistic draws used the coordinate-wise truncated-normal Gibbs "
                     "sweep after joint rejection failed (valid, but mixes more slowly)")
    post = make_posterior({prob.param: theta}, stats, "gibbs-ss", model, release, notes,
                          exact=False)
    flag_convergence(post)   # warning + note when R-hat > 1.01 or ESS < 400
    return post
