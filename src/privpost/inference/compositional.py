"""Seed 002's methods on a DPss release (Guo, Barrientos & Pena; extract §2.5-§2.11).

Methods (each ``run_*(model, release_set, *, prior=..., ...) -> Posterior``, registered in
:data:`privpost.inference.METHODS`; ``model`` is a :class:`~privpost.models.Dirichlet` whose own
prior is p1):

========== ===================== ==========================================================
method     priors (Table 1)      what it does
========== ===================== ==========================================================
dpboots    --                    DP parametric bootstrap (Algorithm 2): truncated-Laplace
                                 de-noising, MLE, bootstrap data censored at ``a``
dpmcmc     p1, p3, p4            exact data augmentation (``damcmc``) on model (2)/(4),
                                 given the censored mean-log statistic s_L only (below)
dpremcmc   p1, p3, p4            ``damcmc`` on ``b`` pseudo-records with weight ``n/b``
                                 (model (5)), with the (w - 1) log-density term
dpabc      p1, p2, p3, p4, p5    rejection ABC, 10% of the proposals accepted
dpapprox   p1, p3, p4            CLT Gibbs (Bernstein-Sheldon), see
                                 :mod:`privpost.inference.compositional_approx`
boots      --                    non-private parametric bootstrap (``records=``)
========== ===================== ==========================================================

The non-private MCMCp1 benchmark is ``method="nonprivate"`` with ``records=`` and a Dirichlet
model (its prior is p1). With ``prior="p1"`` on a split release the methods use the D2 statistic
only (the seed's p1 methods use a release on the whole data; make a release without ``split``
for them). p2-p5 need a split release and use D2's statistic for the likelihood.

What every method conditions on (:data:`CONDITIONS_NOTE`, in every posterior's notes): the
censored mean-log release s_L (D2's with a split; D1's only through a p2-p5 prior) at the
published threshold ``a``, taken as fixed. None of them conditions on the noisy threshold score
S_G, although S_G also depends on the records (it counts them by their smallest part) and chose
``a``. So ``dpmcmc`` is exact for p(alpha | s_L) with ``a`` fixed -- not for the posterior given
the whole DPss release, p(alpha | S_G, s_L), which would multiply in the score's two-sided
geometric likelihood given the latent records (on a three-record case the two differ by about
3.5 Monte Carlo standard errors in alpha_3's mean, by issue #23's independent check).
"""

from __future__ import annotations

import math

import numpy as np

from privpost._rng import as_generator
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference._gibbs_common import make_posterior, reject_unknown
from privpost.inference._dpss_fits import (INIT_NOTE, _init_from, _laplace, dpboots_draws,  # noqa: F401
                                           dpmcmc_posterior)
from privpost.models.dirichlet_tools import censored_mean_logs, dirichlet_mle
from privpost.models.dirichlet import Dirichlet, dirichlet_open

__all__ = ["run_dpboots", "run_boots", "run_dpmcmc", "run_dpremcmc", "run_dpabc",
           "dpboots_draws", "dpmcmc_posterior", "dpremcmc_posterior", "weighted_model",
           "pseudo_release", "DPREMCMC_SUPPORTS",
           "DirichletProposal", "TemperedDirichletProposal", "METHOD_PRIORS", "CONDITIONS_NOTE"]

#: what seed 002's methods condition on (module docstring), in every posterior's notes
CONDITIONS_NOTE = ("conditions on: the censored mean-log release s_L at the published threshold "
                   "a, taken as fixed -- NOT on the noisy threshold score S_G, which also depends "
                   "on the records (and chose a); exactness claims are for p(alpha | s_L), not "
                   "for p(alpha | the whole DPss release)")
TARGET_DPMCMC = "p(alpha | s_L) (the censored mean-log release alone; the score S_G is ignored)"

METHOD_PRIORS = {"dpmcmc": ("p1", "p3", "p4"), "dpremcmc": ("p1", "p3", "p4"),
                 "dpabc": ("p1", "p2", "p3", "p4", "p5"), "dpapprox": ("p1", "p3", "p4")}


# ----------------------------------------------------------------------------------- helpers
def _check_model(model):
    if not isinstance(model, Dirichlet):
        raise IncompatibleError(f"seed 002's methods need a Dirichlet model (e.g. "
                                f"'dirichlet:parts=3'), got {type(model).__name__}")


def _setup(method, model, release, prior):
    """Parse the DPss set and pick the statistic the likelihood uses. Returns (dpss, rel, notes)."""
    from privpost.releases.dpss import parse_dpss

    _check_model(model)
    dpss = parse_dpss(release)
    if dpss.parts != model.parts:
        raise IncompatibleError(f"the release has {dpss.parts} parts but the model "
                                f"{model.parts}; use 'dirichlet:parts={dpss.parts}'")
    allowed = METHOD_PRIORS.get(method)
    if allowed is not None and prior not in allowed:
        raise IncompatibleError(f"method {method!r} takes prior {' / '.join(allowed)} (seed 002 "
                                f"Table 1), got {prior!r}")
    notes = [f"DPss release: a = {dpss.threshold:g} chosen by the {dpss.rule!r} rule (margin "
             f"k = {dpss.margin_k}); eps1 = {dpss.epsilon1:g}, eps2 = {dpss.epsilon2:g}",
             CONDITIONS_NOTE]
    if not dpss.split:
        return dpss, dpss.stat, notes
    if prior in (None, "p1"):
        what = "with prior p1" if prior else f"by {method}"
        notes.append(f"split release: the D2 statistic only is used (n2 = {dpss.n2}); the D1 "
                     f"statistic is unused {what} (make a release without split for it)")
    return dpss, dpss.stat2, notes


def _ints(**kw):
    for k, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise PrivpostError(f"{k} must be an integer >= 1, got {v!r}")


# ----------------------------------------------------------------------------------- DPBoots
def _shape(draws, chains):
    d = draws.shape[-1]
    return {"alpha": draws.reshape(chains, -1, d)}


def run_dpboots(model, release, *, prior=None, draws: int = 1000, chains: int = 1, seed=None,
                progress: bool = False, warmup=None, **options):
    """DPBoots: ``draws`` bootstrap replicates of alpha (percentile intervals), shape (1, draws).

    ``warmup`` and ``chains`` are accepted (CLI defaults) and ignored: the replicates are
    independent, one "chain" holds them all.
    """
    reject_unknown("dpboots", options)
    if prior not in (None, "none"):
        raise IncompatibleError("dpboots is frequentist: it takes no prior (omit prior=)")
    _ints(draws=draws, chains=chains)
    chains = 1
    dpss, rel, notes = _setup("dpboots", model, release, None)
    rng = as_generator(seed)
    boot, dropped = dpboots_draws(rel.observed, rel.mechanism.scale, dpss.threshold, rel.n,
                                  draws, rng)
    notes += ["dpboots: parametric bootstrap (frequentist); the draws are bootstrap replicates "
              "of the MLE, their percentile intervals are confidence intervals, not credible "
              "intervals",
              "dpboots: noise de-convolved by truncated Laplace draws; assumes S_0(D) ~ S_0(D, a) "
              "(little censoring), bootstrap statistics censored at the released a"]
    if dropped:
        notes.append(f"dpboots: {dropped} replicate(s) without an MLE were redrawn")
    return make_posterior(_shape(boot, chains), {}, "dpboots", model, release, notes, exact=False)


def run_boots(model, release=None, *, records=None, draws: int = 1000, chains: int = 1,
              seed=None, progress: bool = False, warmup=None, prior=None, **options):
    """Non-private parametric bootstrap ``Boots`` from the confidential ``records`` (n, D)."""
    reject_unknown("boots", options)
    _check_model(model)
    if records is None:
        raise IncompatibleError("method='boots' needs the confidential records: "
                                "infer(model, None, method='boots', records=x)")
    _ints(draws=draws, chains=chains)
    chains = 1     # independent replicates: one "chain" of ``draws``
    x = model.validate_records(records)
    n = x.shape[0]
    a_hat = dirichlet_mle(np.log(x).mean(axis=0))
    if not np.all(np.isfinite(a_hat)):
        raise PrivpostError("boots: the Dirichlet MLE of the records does not exist")
    rng = as_generator(seed)
    out, need = [], draws * chains
    while need > 0:
        a_t = dirichlet_mle(censored_mean_logs(np.tile(a_hat, (need, 1)), n, None, rng))
        a_t = a_t[np.all(np.isfinite(a_t), axis=1)]
        out.append(a_t)
        need -= a_t.shape[0]
    notes = ["boots: non-private parametric bootstrap from the confidential records (for "
             f"simulation studies); MLE = {np.round(a_hat, 4).tolist()}"]
    return make_posterior(_shape(np.concatenate(out)[:draws * chains], chains), {}, "boots",
                          model, None, notes, exact=False)


# ----------------------------------------------------------------------------------- DPMCMC
def _exact_for(notes, target: str) -> list[str]:
    """damcmc's notes with its "exact: ..." note restated for what it is exact for, ``target``
    (a DPss method whose damcmc run targets an approximation of the DPss posterior)."""
    return [f"sampler: DA-MCMC (Ju et al. 2022) is exact for {target}; its only error there is "
            "Monte Carlo error (check r_hat and ess_bulk)" if n.startswith("exact: ") else n
            for n in notes]


def run_dpmcmc(model, release, *, prior: str = "p1", seed=None, prior_draws: int = 2000,
               **options):
    """DPMCMC (model (2) with p1, model (4) with p3/p4): exact DA-MCMC on the censored release.

    Options are passed to :func:`privpost.inference.damcmc.run` (``draws``, ``warmup``,
    ``chains``, ``progress``, ``cores``, ...). The target is the exact posterior given the
    censored mean-log statistic s_L (D2's with a split) at the published threshold ``a``, taken
    as fixed: p(alpha | s_L) (censoring handled exactly: the latent records are censored in the
    Laplace term, uncensored in the alpha update). It does **not** condition on the noisy
    threshold score S_G of the same release, which also depends on the records (see the module
    docstring): it is not the posterior given the whole DPss release.
    """
    from privpost.inference.compositional_priors import build_prior

    dpss, rel, notes = _setup("dpmcmc", model, release, prior)
    rng = as_generator(seed)
    spec = build_prior(model, dpss, prior, rng, prior_draws=prior_draws)
    post = dpmcmc_posterior(spec.model, rel, seed=rng, **options)
    post.method = "dpmcmc"
    post.notes = notes + spec.notes + _exact_for(
        post.notes, TARGET_DPMCMC if prior == "p1" else
        f"{TARGET_DPMCMC} under the estimated prior {prior}")
    if prior != "p1":
        post.exact = False
        post.notes.append(f"prior {prior} is estimated from the D1 release (a data-dependent "
                          "prior fitted to a finite bootstrap sample)")
    return post


# ----------------------------------------------------------------------------------- DPreMCMC
#: DPreMCMC targets: ``"uncensored"`` (default) = model (5) with the pseudo-records restricted
#: to ``min_j x_j >= a`` (proper); ``"seed"`` = model (5) as printed (improper for some
#: ``alpha_j <= 1 - 1/w``)
DPREMCMC_SUPPORTS = ("uncensored", "seed")


class _WeightedDirichlet(Dirichlet):
    """Dirichlet whose records count ``weight`` times: ``log f_w(x | alpha) = w log Dir(x |
    alpha)`` on ``{x : min_j x_j >= floor}`` (``-inf`` outside; ``floor = 0``: the whole
    simplex); ``update`` draws alpha given ``b`` records replicated ``w`` times (the slice
    target with ``n -> w b`` and ``T -> w T``). No compiled path."""

    def __init__(self, base: Dirichlet, weight: float, floor: float = 0.0):
        h = base.hyperparameters()
        super().__init__(**h)
        self.weight = float(weight)
        self.floor = float(floor)

    def log_likelihood(self, params, records):
        ll = self.weight * super().log_likelihood(params, records)
        if self.floor > 0:
            ll = np.where(np.asarray(records).min(axis=-1) >= self.floor, ll, -np.inf)
        return ll

    def simulate(self, params, n, rng):
        """Starting records: Dir(alpha) draws; rows below ``floor`` are mapped into the
        restricted region (``x -> floor + (1 - D floor) x``; used only to start a chain)."""
        x = super().simulate(params, n, rng)
        if self.floor > 0:
            bad = x.min(axis=-1) < self.floor
            x[bad] = self.floor + (1.0 - self.parts * self.floor) * x[bad]
        return x

    def default_warmup(self, release):
        """``None``: damcmc's own default (Dirichlet's shorter warm-up was measured on the
        untempered law only, not on model (5))."""
        return None

    def update(self, params, records, rng):
        b = records.shape[0]
        T = np.log(records).sum(axis=0)
        u = np.log(np.asarray(params["alpha"], dtype=np.float64))
        w = self.weight
        if self.slice_method == "univariate":
            u = self._sweep_univariate(u, (w * T).tolist(), w * b, rng)
        else:
            for _ in range(self.slice_steps):
                u = self._step_hyperrect(u, w * T, w * b, rng)
        return {"alpha": np.exp(u)}

    def compiled_model(self):
        return None

    # ---- exact moves for the weighted law (issue 22 item 3) ----------------------------------
    # Dir(x | alpha)^w = c_w(alpha) Dir(x | beta), beta = w (alpha - 1) + 1 (when every beta_j > 0),
    # log c_w(alpha) = log B(beta) - w log B(alpha) (B the multivariate beta function). So model
    # (5)'s pseudo-records given alpha are Dir(beta) restricted to min_j x_j >= floor, and alpha
    # carries the factor c_w(alpha)^b, which the record-level view hides (it is what pulls
    # alpha_0 up, EXPERIMENTS.md §8.3). The non-centred move below is Dirichlet's partially
    # non-centred move for Dir(beta), with c_w(alpha)^b and the floor in the innovations' law.

    def tempered_shape(self, alpha) -> np.ndarray:
        """``beta = w (alpha - 1) + 1`` ``(D,)``: the shape of ``Dir(x | alpha)^w`` normalised."""
        return self.weight * (np.asarray(alpha, dtype=np.float64) - 1.0) + 1.0

    def log_tempered_constant(self, alpha) -> float:
        """``log c_w(alpha) = log B(beta) - w log B(alpha)`` (``-inf`` unless every
        ``beta_j > 0``): ``int Dir(x | alpha)^w dx`` over the simplex."""
        from scipy.special import gammaln

        a = np.asarray(alpha, dtype=np.float64)
        b = self.tempered_shape(a)
        if not (np.all(b > 0) and np.all(a > 0) and np.all(np.isfinite(b))):
            return -math.inf
        return float(gammaln(b).sum() - gammaln(b.sum())
                     - self.weight * (gammaln(a).sum() - gammaln(a.sum())))

    def innovations(self, params, records, rng=None):
        """``(b, D + 1)``: Dirichlet's standardised log-gammas of the records under ``Dir(beta)``
        and a last column 0; where some ``beta_j <= 0`` (``alpha_j <= 1 - 1/w``) the logs of the
        records and a last column 1 (then the move cannot start: its law is ``-inf`` for every
        proposal, so it stays -- a kernel that never leaves the region where it is defined is
        still reversible)."""
        x = np.asarray(records, dtype=np.float64)
        beta = self.tempered_shape(params["alpha"])
        if np.all(beta > 0):
            u = super().innovations({"alpha": beta}, x, rng)
            return np.concatenate([u, np.zeros((x.shape[0], 1))], axis=1)
        with np.errstate(divide="ignore"):
            return np.concatenate([np.log(x), np.ones((x.shape[0], 1))], axis=1)

    def from_innovations(self, params, u):
        u = np.asarray(u, dtype=np.float64)
        if u.shape[0] and np.any(u[:, -1] != 0):
            x = np.exp(u[:, :-1])
            return x / x.sum(axis=1, keepdims=True)
        return super().from_innovations({"alpha": self.tempered_shape(params["alpha"])},
                                        u[:, :-1])

    def innovations_log_density(self, params, u):
        """``log p(u | alpha)`` of the pseudo-records' innovations under model (5), up to a
        constant free of alpha: Dirichlet's for ``Dir(beta)`` + ``b log c_w(alpha)`` (+ ``-inf``
        when a record falls below the floor); ``-inf`` where some ``beta_j <= 0``."""
        u = np.asarray(u, dtype=np.float64)
        if u.shape[0] and np.any(u[:, -1] != 0):
            return -math.inf
        lc = self.log_tempered_constant(params["alpha"])
        if lc == -math.inf:
            return -math.inf
        val = super().innovations_log_density({"alpha": self.tempered_shape(params["alpha"])},
                                              u[:, :-1])
        if val == -math.inf:
            return val
        if self.floor > 0 and np.any(self.from_innovations(params, u).min(axis=1) < self.floor):
            return -math.inf
        return val + u.shape[0] * lc

    def interweave_auto_steps(self, n, noise_var, params):
        return 2, "model (5): 2 non-centred moves per iteration (b records: cheap)"


def weighted_model(model: Dirichlet, weight: float, floor: float = 0.0) -> Dirichlet:
    """The model (5) record law ``Dir(x | alpha)^weight`` (restricted to ``min_j x_j >= floor``
    when ``floor > 0``) with the same prior as ``model``."""
    return _WeightedDirichlet(model, weight, floor)


class TemperedDirichletProposal:
    """Independent proposal for model (5)'s pseudo-records: ``x* ~ Dir(beta)``,
    ``beta = w (alpha - 1) + 1`` -- the normalised ``Dir(x | alpha)^w`` -- where every
    ``beta_j > 0``, else ``Dir(alpha)`` (the choice depends on alpha only, fixed during a sweep).

    With ``Dir(beta)``, damcmc's acceptance log-ratio ``w[log Dir(x*|alpha) - log Dir(x|alpha)]
    + log q(x) - log q(x*) + Laplace terms`` reduces to the Laplace terms (and the floor): the
    proposal is the pseudo-record's exact conditional before the Laplace term, as the model
    proposal is in Ju et al.'s sampler. ``Dir(alpha)`` (the seed's proposal) is accepted at a
    rate that falls like ``w^{-(D-1)/2}`` (the tempered law is ``sqrt(w)`` times narrower).
    """

    def __init__(self, w: float):
        self.w = float(w)

    def _shape(self, params):
        a = np.asarray(params["alpha"], dtype=np.float64)
        b = self.w * (a - 1.0) + 1.0
        return b if np.all(b > 0) else a

    def propose(self, records, params, rng):
        return dirichlet_open(rng, self._shape(params), records.shape[0])

    def log_ratio(self, records, proposed, params):
        return (np.log(records) - np.log(proposed)) @ (self._shape(params) - 1.0)


class DirichletProposal:
    """Independent record proposal ``x* ~ Dir(alpha)`` for damcmc's Algorithm 2.

    ``log_ratio = log q(x | x*) - log q(x* | x) = log Dir(x | alpha) - log Dir(x* | alpha)``;
    with the weighted likelihood ``w log Dir`` damcmc's acceptance log-ratio becomes
    ``(w - 1)[log Dir(x* | alpha) - log Dir(x | alpha)] + Laplace terms`` -- the term the
    extract derives (§2.8); it vanishes at ``w = 1`` (then this is Algorithm 1).
    """

    def propose(self, records, params, rng):
        return dirichlet_open(rng, np.asarray(params["alpha"], dtype=np.float64), records.shape[0])

    def log_ratio(self, records, proposed, params):
        a = np.asarray(params["alpha"], dtype=np.float64)
        return (np.log(records) - np.log(proposed)) @ (a - 1.0)


def pseudo_release(rel, b: int):
    """A Release object for ``b`` pseudo-records: same observed ``s_L``, same Laplace scale
    ``lambda = -D log(a)/(n eps1)`` (of the real ``n``), but ``S_0`` the mean over the ``b``
    records (query ``n = b``). Only a likelihood device: its stated privacy is not a release's."""
    from privpost.mechanisms import Laplace
    from privpost.queries import CensoredLogMean
    from privpost.releases.release import Release

    q = CensoredLogMean(rel.query.parts, rel.query.threshold, b, columns=rel.query.columns)
    mech = Laplace(scale=float(rel.mechanism.scale)).calibrate(q.sensitivity("l1"))
    return Release(query=q, mechanism=mech, n=b, observed=np.asarray(rel.observed),
                   metadata={"pseudo": f"{b} pseudo-records standing for n = {rel.n}"})


def dpremcmc_posterior(model, rel, b: int, *, support: str = "uncensored",
                       weight_term: bool = True, **opts):
    """``damcmc`` on model (5) for one CensoredLogMean release ``rel`` (``rel.n`` records):
    ``b`` pseudo-records of weight ``w = rel.n / b``; returns (posterior, w, floor).

    ``support="uncensored"`` restricts the pseudo-records to ``min_j x_j >= a`` when ``w > 1``
    (see :func:`run_dpremcmc`); ``b = rel.n`` (``w = 1``) is DPMCMC's target, unrestricted.
    """
    from privpost.inference import damcmc

    w = rel.n / b
    a = float(rel.query.threshold)
    floor = a if (support == "uncensored" and w > 1) else 0.0
    opts = dict(opts)
    dispersed = opts.get("init") is None
    if dispersed:
        opts["init"] = _init_from(rel, opts)
    opts.setdefault("fast_path", False)
    # exact moves of model (5) (issue 22): the tempered record proposal, and 2 non-centred
    # alpha moves per iteration (b records: each costs O(b D)); none without the (w - 1) term
    # (no joint target to move on)
    opts.setdefault("interweave", 2 if weight_term else 0)
    proposal = opts.pop("proposal", None) or (TemperedDirichletProposal(w) if weight_term
                                              else _UnweightedProposal(w))
    post = damcmc.run(weighted_model(model, w, floor), pseudo_release(rel, b),
                      proposal=proposal, **opts)
    if dispersed and opts["init"] is not None:
        post.notes.append(INIT_NOTE)
    return post, w, floor



def run_dpremcmc(model, release, *, prior: str = "p1", b: int = 5, seed=None,
                 prior_draws: int = 2000, support: str = "uncensored", weight_term: bool = True,
                 **options):
    """DPreMCMC (model (5)): ``b`` latent pseudo-records, each standing for ``w = n/b`` records.

    Options go to :func:`privpost.inference.damcmc.run`. ``b = n`` gives DPMCMC's target.

    **Target.** Model (5) as printed, ``pi(alpha, x_1..x_b) propto pi_0(alpha) prod_j
    Lap(s_L,j | S_0(x, a)_j, lambda) prod_i Dir(x_i | alpha)^w``, is **improper** whenever some
    ``alpha_j <= 1 - 1/w``: the Laplace term sees only ``max(x_ij, a)``, so it is constant for
    ``x_ij < a``, and ``int_0^a x^{w (alpha_j - 1)} dx`` diverges (chains of an exact sampler
    drift to ``alpha_j -> 0``). ``support="uncensored"`` (default) samples the closest proper
    target: the same model with every pseudo-record restricted to the uncensored region
    ``{x : min_j x_j >= a}`` (when ``w > 1``). Why this and not the alternatives:

    * the restriction removes exactly the non-integrable part -- the region where a
      pseudo-record carries no information about ``s_L`` -- and nothing else: where model (5)
      is proper with ``alpha_j > 1`` the mass it removes is ``O(a^{w(alpha_j - 1) + 1})``
      (``< 1e-300`` for alpha3, ``a = 0.01``, ``w = 150``); the alpha step is the seed's
      weighted slice update, unchanged; and at ``lambda -> 0`` the alpha-marginal is still
      the non-private posterior given ``S_0 = s_L`` (the b-record weighted likelihood depends
      on ``x`` only through ``S_0(x)``), which is what the seed intends;
    * normalising each pseudo-record (``Dir(x|alpha)^w / int Dir^w = Dir(x | w(alpha-1)+1)``)
      is proper only for ``alpha_j > 1 - 1/w`` (it excludes alpha2 = 0.5), and its mean-log
      is ``~ log`` of the Dirichlet *mode*, not ``Psi(alpha_j) - Psi(alpha_0)``: for alpha3,
      ``w = 150`` the third component is off by +0.17 on the log scale, many posterior sds,
      even with no noise; no Dirichlet pseudo-record law can match both the mean and the
      ``Sigma/n`` covariance of ``S_0``;
    * truncating the *prior* to ``alpha_j > 1 - 1/w`` is still improper (the mass
      ``a^{c+1}/(c+1)``, ``c = w(alpha_j - 1)``, diverges logarithmically at the boundary)
      and excludes alpha2's truth.

    What the restriction does not fix (a property of model (5) itself, EXPERIMENTS.md §8.3):
    ``Dir(x | alpha)^w = c_w(alpha) Dir(x | beta)``, ``beta = w (alpha - 1) + 1``, so the
    alpha-marginal carries ``c_w(alpha)^b ~ alpha_0^((n - b)(D - 1)/2)``; the Laplace term
    resists only when ``lambda`` is below ~1e-4, so at any usual eps alpha_0 is held only by the
    prior's tail (about ``5 (n - b)(D - 1)`` under p1; checked by quadrature and by the
    sampler). A run that lands there warns. With ``alpha_j < 1`` the restricted pseudo-records
    also pile up at ``x_j = a``.

    **Moves** (exact for model (5)): records proposed from ``Dir(beta)``
    (:class:`TemperedDirichletProposal`; ``Dir(alpha)`` where some ``beta_j <= 0``), accepted
    on the Laplace ratio; the weighted slice update of alpha; and 2 non-centred alpha moves per
    iteration (``interweave``) whose innovations' law carries ``c_w(alpha)^b``.

    ``support="seed"``: model (5) as printed (improper; warns whenever draws enter the
    improper region). ``weight_term=False`` omits the (w - 1) term (pseudo-records drawn from
    ``Dir(alpha)`` times the Laplace term, alpha updated with weight ``w``): a Gibbs scheme with
    incompatible conditionals (no joint target), kept for comparison with the seed's unstated
    implementation; it always warns.
    """
    from privpost.inference.compositional_priors import build_prior
    import warnings

    _ints(b=b)
    if support not in DPREMCMC_SUPPORTS:
        raise PrivpostError(f"support must be one of {' / '.join(DPREMCMC_SUPPORTS)} (the "
                            f"default 'uncensored' is proper), got {support!r}")
    if not isinstance(weight_term, bool):
        raise PrivpostError(f"weight_term must be true or false, got {weight_term!r}")
    dpss, rel, notes = _setup("dpremcmc", model, release, prior)
    if b > rel.n:
        raise PrivpostError(f"b must be <= n = {rel.n} (the records it stands for), got {b}")
    rng = as_generator(seed)
    spec = build_prior(model, dpss, prior, rng, prior_draws=prior_draws)
    post, w, floor = dpremcmc_posterior(spec.model, rel, b, support=support,
                                        weight_term=weight_term, seed=rng, **options)
    post.method = "dpremcmc"
    post.exact = False
    term = ("includes the (w - 1) log-density term" if weight_term else
            "omits the (w - 1) term (records from Dir(alpha) x Laplace; no joint target)")
    where = (f"pseudo-records restricted to min_j x_j >= a = {floor:g} (model (5) is improper "
             "without it; this removes only the censored region, where the Laplace term is flat)"
             if floor > 0 else ("model (5) as printed (support='seed': improper where some "
                                f"alpha_j <= {1 - 1 / w:.4g})" if w > 1 else
                                "w = 1: DPMCMC's target"))
    post.notes = notes + spec.notes + [
        f"dpremcmc: approximation (model (5)): the {rel.n} latent records are replaced by "
        f"b = {b} pseudo-records, each with likelihood weight w = n/b = {w:g}; the record MH "
        f"step {term}; {where}",
        "dpremcmc: model (5)'s alpha-marginal carries c_w(alpha)^b = (int Dir(x|alpha)^w dx)^b, "
        "which grows like alpha_0^((n - b)(D - 1)/2): unless the Laplace scale is tiny, alpha_0 "
        "is held only by the prior's tail (about 5 (n - b)(D - 1) under p1; EXPERIMENTS.md §8.3)"
        ] + _exact_for(post.notes, "model (5), not for the DPss posterior it approximates")
    msg = _collapse_warning(post, rel, w) if weight_term else None
    if not weight_term:
        msg = ("dpremcmc: weight_term=False has no joint target (incompatible conditionals); "
               "its draws are not a posterior of anything")
    elif floor == 0 and w > 1:
        low = float(np.mean(np.any(post.draws["alpha"] <= 1.0 - 1.0 / w, axis=-1)))
        if low > 0:
            msg = (f"dpremcmc: {100 * low:.1f}% of the draws have some alpha_j <= 1 - 1/w = "
                   f"{1 - 1 / w:.4g}, where model (5) as printed is improper (Dir(x|alpha)^w is "
                   "not integrable): these draws are not a posterior; use the default "
                   "support='uncensored', or dpmcmc")
    if msg:
        warnings.warn(msg, stacklevel=2)
        post.notes.append(msg)
    return post


#: posterior median alpha_0 over the MLE of the released statistic above which dpremcmc warns
COLLAPSE_RATIO = 10.0


def _collapse_warning(post, rel, w: float):
    """The warning of a model (5) run whose alpha_0 went where c_w(alpha)^b puts it: posterior
    median alpha_0 above ``COLLAPSE_RATIO`` times the alpha_0 of ``MLE(s_L)`` (``None`` when
    it did not, when ``w = 1``, or when ``s_L`` has no MLE)."""
    if w <= 1:
        return None
    a_obs = dirichlet_mle(np.asarray(rel.observed, dtype=np.float64))
    if not np.all(np.isfinite(a_obs)):
        return None
    med = float(np.median(np.asarray(post.draws["alpha"]).sum(axis=-1)))
    ref = float(a_obs.sum())
    if med <= COLLAPSE_RATIO * ref:
        return None
    return (f"dpremcmc: posterior median alpha_0 = {med:.4g} is {med / ref:.3g}x the alpha_0 of "
            f"MLE(s_L) ({ref:.4g}): model (5)'s weighted pseudo-records reward alpha_0 by "
            f"c_w(alpha)^b ~ alpha_0^((n - b)(D - 1)/2), so its alpha_0 is the prior's tail, not "
            f"the data's (EXPERIMENTS.md §8.3); use dpmcmc (exact) or dpapprox")


class _UnweightedProposal(DirichletProposal):
    """Cancels the weighted likelihood ratio: acceptance = Laplace ratio only."""

    def __init__(self, w: float):
        self.w = float(w)

    def log_ratio(self, records, proposed, params):
        return self.w * super().log_ratio(records, proposed, params)


# ----------------------------------------------------------------------------------- DPABC
def run_dpabc(model, release, *, prior: str = "p1", draws: int = 1000, chains: int = 1,
              proposals_per_draw: int = 10, seed=None, progress: bool = False, warmup=None,
              prior_draws: int = 2000, p5_options: dict | None = None, **options):
    """Rejection ABC (Tavare et al. 1997) with tolerance at the 10% distance quantile.

    ``R = proposals_per_draw * draws`` proposals ``alpha_r ~ prior``; for each, ``N``
    (``n``, or ``n2`` with a split) Dirichlet records, censored mean-log plus fresh
    ``Laplace(0, lambda_N)`` noise (the release's own scale); distance ``||s_r - s_L||_2``;
    the ``draws`` closest are kept -- acceptance exactly ``1/proposals_per_draw``
    (10% by default, Pritchard et al. 1999). ``chains`` and ``warmup`` are accepted (CLI
    defaults) and ignored: the accepted draws form one "chain". ``progress``: a report on stderr
    every 10% of the simulations. ``p5_options``: options of the D1 DPMCMC chains that build
    prior p5 (:func:`privpost.inference.damcmc.run`; by default they run until converged within
    300 s, :func:`privpost.inference.compositional_priors.build_prior`; e.g. ``{"draws": 500}``
    fixes their length, ``{"max_seconds": 60}`` sets the budget); their diagnostics go to
    ``chain_stats`` ``prior_r_hat`` / ``prior_ess``, their check to ``converged`` (False:
    damcmc's ConvergenceWarning and ``NOT CONVERGED`` note, so
    ``privpost infer --strict`` exits 3).
    """
    from privpost.inference.compositional_priors import build_prior

    reject_unknown("dpabc", options)
    _ints(draws=draws, chains=chains, proposals_per_draw=proposals_per_draw)
    dpss, rel, notes = _setup("dpabc", model, release, prior)
    rng = as_generator(seed)
    spec = build_prior(model, dpss, prior, rng, prior_draws=prior_draws, p5_options=p5_options,
                       progress=progress)
    chains = 1
    keep = draws
    R = proposals_per_draw * keep
    alpha = spec.sample(R, rng)
    from privpost.inference._gibbs_common import Progress

    bar = Progress(R, progress, "dpabc")
    sim = np.empty(alpha.shape)
    step = 200
    for i in range(0, R, step):
        sim[i:i + step] = censored_mean_logs(alpha[i:i + step], rel.n, dpss.threshold, rng)
        bar.update(min(i + step, R) - 1)
    sim += _laplace(rng, rel.mechanism.scale, sim.shape)
    dist = np.sqrt(((sim - rel.observed) ** 2).sum(axis=1))
    idx = np.argsort(dist, kind="stable")[:keep]
    tol = float(dist[idx[-1]])
    rng.shuffle(idx)
    notes += spec.notes + [
        f"dpabc: rejection ABC approximation; {R} proposals, the {keep} closest accepted "
        f"(acceptance {keep / R:.3g}), tolerance {tol:.4g} on the L2 distance of mean-logs"]
    post = make_posterior(_shape(alpha[idx], chains),
                          {"distance": dist[idx].reshape(chains, -1)}, "dpabc", model, release,
                          notes, exact=False,
                          chain_stats={"tolerance": np.full(chains, tol),
                                       "proposals": np.full(chains, R // chains)})
    if spec.diagnostics is not None:
        post.chain_stats["prior_r_hat"] = np.full(chains, spec.diagnostics["r_hat"])
        post.chain_stats["prior_ess"] = np.full(chains, spec.diagnostics["ess"])
        # the p5 prior sample is MCMC output: its check is this posterior's (--strict exits 3)
        post.converged = spec.diagnostics["converged"]
    return post
