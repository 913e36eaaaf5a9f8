"""DPapprox of seed 002 (Sec. 3.3.4, extract §2.10): CLT Gibbs in the Bernstein-Sheldon style.

Model (6): ``s_L | s0 ~ prod_j Laplace(s0_j, lambda)``, ``s0 | alpha ~ N(mu_alpha,
Sigma_alpha / N)`` with ``mu_alpha = Psi(alpha) - Psi(alpha_0)`` and ``Sigma_alpha =
diag(Psi_1(alpha)) - Psi_1(alpha_0) 1 1^T`` (the per-record covariance of ``log x``; **divided by
N**, which the paper omits -- extract pitfall 11), prior on alpha. Censoring is ignored (the
model is for the uncensored mean-log), by design of the seed. Gibbs sweep:

1. ``1/sigma_j^2 ~ InverseGaussian(mean = 1/(lambda |s_L,j - s0_j|), shape = 1/lambda^2)``
   (Laplace as a normal scale mixture with ``sigma^2 ~ Exp(rate 1/(2 lambda^2))``, Park &
   Casella 2008);
2. ``s0 ~ N(m, V)``, ``V = (N Sigma^-1 + Lambda)^-1``, ``m = V (N Sigma^-1 mu + Lambda s_L)``,
   ``Lambda = diag(1/sigma^2)``;
3. then ``(alpha, s0)`` jointly given ``sigma^2`` (a blocked, collapsed step: plain Gibbs
   between ``s0`` and ``alpha`` mixes very slowly because ``s0 | alpha`` has covariance
   ``Sigma_alpha / N``): ``mh_steps`` random-walk Metropolis steps on ``log(alpha)`` for the
   marginal ``N(s_L | mu_alpha, Sigma_alpha/N + diag(sigma^2)) pi_0(alpha)`` (Jacobian
   included; ``s0`` integrated out), then ``s0 | alpha, sigma^2`` as in step 2.
   The step size adapts (Robbins-Monro towards acceptance 0.3) during warm-up only; halfway
   through warm-up the proposal takes the covariance of the warm-up draws (the posterior of
   ``log alpha`` is elongated along the concentration ``alpha_0``); fixed after warm-up.

The sweep leaves ``p(alpha, s0, sigma^2 | s_L)`` invariant, so the alpha draws target model (6).

**Starts.** Chain ``c`` starts at ``alpha_c = MLE(s_L + fresh mechanism noise)``
(:func:`privpost.inference.compositional._init_from`, as DPMCMC; the observed statistic's MLE
where a re-noised one has none; prior draws, one per chain, when even the observed statistic has
no MLE), so the starts spread about as much as the statistic is uncertain and split R-hat can
see a chain that settles elsewhere (one shared start at ``MLE(s_L)`` hid that); ``s0`` starts at
``s_L``.

**Run until converged** (``draws=None``, the default): after the warm-up the chains run in
rounds decided by :class:`privpost.inference._until.Plan` -- the rule and schedule of
``damcmc.run(draws=None)`` and the HMM samplers: stop when every entry of alpha has split R-hat
<= 1.01 and bulk and tail ESS >= 400 (first round :data:`FIRST_DRAWS` draws per chain, later
rounds sized from the ESS reached), or when a budget runs out: :data:`MAX_DRAWS` kept draws per
chain, :data:`MAX_SECONDS` s of wall time for the warm-up and draws (the p3/p4 prior's
construction not counted). The chains are resumable :class:`ApproxChain` objects driven by
:func:`privpost.inference._until.run_rounds` in round-robin blocks (time budget checked between
blocks; on expiry in the warm-up, the warm-up is cut and each chain makes 4 draws). A chain's
random stream and its warm-up adaptation do not depend on the blocks or rounds, so the result
equals a fixed ``draws=`` run of the final length with the same seed and warm-up. A run that
misses the thresholds -- a budget spent, or a fixed ``draws=`` too short -- warns
(:class:`~privpost.errors.ConvergenceWarning`), says so in a ``NOT CONVERGED`` note and sets
``converged=False`` (``privpost infer --strict`` exits 3).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import digamma, zeta

from privpost._rng import spawn
from privpost.inference._gibbs_common import check_sampler_options, make_posterior, reject_unknown
from privpost.models.dirichlet_tools import dirichlet_mle


def _trigamma(x):
    """Psi_1(x) = zeta(2, x) (scipy's polygamma is a slow Python wrapper)."""
    return zeta(2, x)


__all__ = ["run_dpapprox", "clt_loglik", "ApproxChain", "FIRST_DRAWS", "MAX_DRAWS",
           "MAX_SECONDS", "WARMUP", "CHAINS"]

FIRST_DRAWS = 1000     # run until converged: draws per chain of the first round
MAX_DRAWS = 20_000     # default draw budget: kept draws per chain (~0.5 ms per iteration measured
                       # at n = 400-1000, D = 3 on a 2-core machine at load ~4: 4 chains x
                       # 21,000 iterations ~ 45 s)
MAX_SECONDS = 120.0    # default time budget of the warm-up and draws, seconds
WARMUP = 1000          # default warm-up iterations per chain (step size and covariance adapt)
CHAINS = 4
BLOCK_SECONDS = 0.2    # target wall time of one chain's block between budget checks


def clt_loglik(s0, alpha, N, extra_var=None) -> float:
    """``log N(s0 | mu_alpha, Sigma_alpha / N + diag(extra_var))`` (full normalising constant)."""
    a = np.asarray(alpha, dtype=np.float64)
    mu = digamma(a) - digamma(a.sum())
    S = np.diag(_trigamma(a)) - _trigamma(a.sum())
    S = S / N
    if extra_var is not None:
        S = S + np.diag(extra_var)
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return -math.inf
    r = np.linalg.solve(L, np.asarray(s0) - mu)
    return float(-0.5 * r @ r - np.log(np.diag(L)).sum() - 0.5 * a.size * math.log(2 * math.pi))


def _log_target(u, sL, N, model, var):
    if not np.all(np.abs(u) < 700):
        return -math.inf
    a = np.exp(u)
    lp = model.log_prior({"alpha": a})
    if not np.isfinite(lp):
        return -math.inf
    return clt_loglik(sL, a, N, var) + lp + float(u.sum())


class ApproxChain:
    """One resumable DPapprox chain (the Gibbs sweep of the module docstring).

    State: ``u = log(alpha)`` ``(D,)``, ``s0`` ``(D,)``, the MH step ``log_step`` and proposal
    factor ``C`` ``(D, D)``, the warm-up history of ``u`` (for the covariance), the generator
    ``rng``. :meth:`run` ``k`` more iterations, keeping their draws or not; iterations run with
    ``keep=False`` while fewer than ``warmup`` are done adapt the step (Robbins-Monro towards
    acceptance 0.3) and, at ``warmup // 2``, the proposal covariance; kept iterations never
    adapt. The stream is consumed in the same order whatever the split into :meth:`run` calls,
    so ``run(warmup, False); run(a, True); run(b, True)`` equals ``run(warmup, False);
    run(a + b, True)``.

    ``start``: alpha ``(D,)`` to start from; ``None``: ``MLE(s_L)``, or a prior draw (from
    ``rng``) when it does not exist.
    """

    def __init__(self, model, sL, lam: float, N: int, mh_steps: int, rng, warmup: int,
                 start=None):
        self.model, self.sL, self.lam, self.N = model, np.asarray(sL, dtype=np.float64), lam, N
        self.mh_steps, self.rng, self.warmup = int(mh_steps), rng, int(warmup)
        D = self.D = self.sL.size
        if start is None:
            a0 = dirichlet_mle(self.sL)
            start = a0 if np.all(np.isfinite(a0)) else model.prior_sample(rng)["alpha"]
        self.u = np.log(np.asarray(start, dtype=np.float64))
        self.s0 = self.sL.copy()
        self.log_step = math.log(0.5 / math.sqrt(D))
        self.C = np.eye(D)
        self.hist: list[np.ndarray] = []
        self.done = 0                   # iterations run
        self.n_stored = 0               # draws kept
        self._alpha: list[np.ndarray] = []
        self._acc: list[np.ndarray] = []

    def run(self, k: int, keep: bool, progress=None) -> None:
        """``k`` more iterations; their alpha draws ``(k, D)`` and MH acceptance rates are
        appended when ``keep``. ``progress(i)`` is called after each with the chain's iteration
        count minus one."""
        k = int(k)
        if k <= 0:
            return
        model, sL, lam, N, rng = self.model, self.sL, self.lam, self.N, self.rng
        D, mh, warmup = self.D, self.mh_steps, self.warmup
        u, s0, log_step, C = self.u, self.s0, self.log_step, self.C
        if keep:
            out, acc = np.empty((k, D)), np.empty(k)
        for j in range(k):
            it = self.done
            adapt = not keep and it < warmup
            e = np.maximum(np.abs(sL - s0), 1e-300)
            with np.errstate(over="ignore", invalid="ignore"):
                prec = rng.wald(1.0 / (lam * e), 1.0 / lam ** 2)
            # at eps ~ 1e10 the mean 1/(lam e) overflows and numpy returns nan: the noise is ~0
            prec = np.clip(np.nan_to_num(prec, nan=1e300, posinf=1e300), 1e-300, 1e300)
            var = 1.0 / prec
            lt = _log_target(u, sL, N, model, var)
            n_acc = 0
            for _ in range(mh):
                prop = u + math.exp(log_step) * (C @ rng.standard_normal(D))
                lp = _log_target(prop, sL, N, model, var)
                ok = math.log(1.0 - rng.random()) < lp - lt
                if ok:
                    u, lt = prop, lp
                    n_acc += 1
                if adapt:
                    log_step += (float(ok) - 0.3) / math.sqrt(it + 1.0)
            a = np.exp(u)
            mu = digamma(a) - digamma(a.sum())
            Sig = np.diag(_trigamma(a)) - _trigamma(a.sum())
            P = N * np.linalg.inv(Sig)
            Vinv = P + np.diag(prec)
            Lv = np.linalg.cholesky(Vinv)
            m = np.linalg.solve(Vinv, P @ mu + prec * sL)
            s0 = m + np.linalg.solve(Lv.T, rng.standard_normal(D))
            if adapt and it < warmup // 2:
                self.hist.append(u.copy())
                if it + 1 == warmup // 2 and warmup >= 40:   # covariance from the first half
                    win = np.array(self.hist[len(self.hist) // 2:])
                    # only if the chain moved enough to estimate it (a chain stuck during the
                    # window would give a ~0 covariance and freeze the rest of the run)
                    if len(np.unique(win, axis=0)) >= max(10, 2 * D):
                        cov = np.cov(win, rowvar=False) + 1e-10 * np.eye(D)
                        C = np.linalg.cholesky(cov)
                        log_step = math.log(2.38 / math.sqrt(D))
                    self.hist = []
            if keep:
                out[j] = a
                acc[j] = n_acc / mh
            self.done += 1
            if progress is not None:
                progress(it)
        self.u, self.s0, self.log_step, self.C = u, s0, log_step, C
        if keep:
            self._alpha.append(out)
            self._acc.append(acc)
            self.n_stored += k

    def result(self) -> dict:
        """``alpha (n_stored, D)``, ``accept_rate (n_stored,)``, ``n_stored``."""
        alpha = np.concatenate(self._alpha) if self._alpha else np.empty((0, self.D))
        acc = np.concatenate(self._acc) if self._acc else np.empty(0)
        return {"alpha": alpha, "accept_rate": acc, "n_stored": self.n_stored}


def _chain(model, sL, lam, N, draws, warmup, mh_steps, rng, bar, offset):
    """One chain of ``warmup`` + ``draws`` iterations from ``MLE(s_L)``: ``(alpha (draws, D),
    accept_rate (draws,))``; ``bar.update(offset + i)`` after iteration ``i``."""
    ch = ApproxChain(model, sL, lam, N, mh_steps, rng, warmup)
    ch.run(warmup, False, lambda i: bar.update(offset + i))
    ch.run(draws, True, lambda i: bar.update(offset + i))
    r = ch.result()
    return r["alpha"], r["accept_rate"]


def run_dpapprox(model, release, *, prior: str = "p1", draws: int | None = None,
                 warmup: int = WARMUP, chains: int = CHAINS, mh_steps: int = 3, seed=None,
                 progress: bool = False, prior_draws: int = 2000, max_draws: int | None = None,
                 max_seconds: float | None = None, **options):
    """DPapprox p1/p3/p4 on a DPss release (see the module docstring).

    ``draws=None`` (default): run until every entry of alpha has split R-hat <= 1.01 and bulk
    and tail ESS >= 400 (rounds of draws, first :data:`FIRST_DRAWS` = 1000 per chain), or a
    budget runs out: ``max_draws`` kept draws per chain (default :data:`MAX_DRAWS` = 20,000)
    and ``max_seconds`` of wall time for the warm-up and draws (default :data:`MAX_SECONDS` =
    120 s; ``None`` with ``max_draws`` given: no time budget). A fixed ``draws=`` runs exactly
    that many (``max_draws`` / ``max_seconds`` are then refused). ``warmup`` (default 1000)
    iterations per chain adapt the MH step and proposal covariance; ``chains`` (default 4)
    start dispersed (module docstring). Either way a run that misses the thresholds warns
    (ConvergenceWarning), adds a ``NOT CONVERGED`` note and sets ``converged=False``.

    Returns a Posterior with ``alpha`` ``(chains, draws, D)``, ``accept_rate`` ``(chains,
    draws)`` of the alpha MH steps and ``chain_stats["start_alpha"]`` ``(chains, D)`` (each
    chain's start); ``exact=False``.
    """
    from privpost.diagnostics import flag
    from privpost.errors import PrivpostError
    from privpost.inference import _until
    from privpost.inference.compositional import INIT_NOTE, _init_from, _setup
    from privpost.inference.compositional_priors import build_prior
    from privpost.limits import check_draws

    reject_unknown("dpapprox", options)
    plan = None
    if draws is None:
        plan = _until.plan_for(max_draws, max_seconds, first=FIRST_DRAWS,
                               default_draws=MAX_DRAWS, default_seconds=MAX_SECONDS)
        draws = plan.first
    else:
        _until.refuse_budgets(max_draws, max_seconds)
    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    if isinstance(mh_steps, bool) or not isinstance(mh_steps, int) or mh_steps < 1:
        raise PrivpostError(f"mh_steps must be an integer >= 1, got {mh_steps!r}")
    dpss, rel, notes = _setup("dpapprox", model, release, prior)
    if plan is not None:
        check_draws("max_draws", chains, plan.max_draws, model.parts)
    # streams 0..chains-1: the chains; chains: the prior (p3/p4); chains + 1: the starts
    rngs = spawn(seed, chains + 2)
    spec = build_prior(model, dpss, prior, rngs[chains], prior_draws=prior_draws)
    sL = np.asarray(rel.observed, dtype=np.float64)
    lam, N = float(rel.mechanism.scale), rel.n
    inits = _init_from(rel, {"chains": chains, "seed": rngs[chains + 1]})
    t0 = time.perf_counter()
    objs = [ApproxChain(spec.model, sL, lam, N, mh_steps, rngs[c], warmup,
                        start=None if inits is None else inits[c]["alpha"])
            for c in range(chains)]
    starts = np.exp(np.stack([ch.u for ch in objs]))
    if plan is not None:
        plan.t0 = t0
    results = _until.sample(objs, warmup, draws, plan, progress, "dpapprox", ["alpha"],
                            block_seconds=BLOCK_SECONDS)
    out = _until.stack(results, ["alpha", "accept_rate"])
    alpha, acc = out["alpha"], out["accept_rate"]
    notes += spec.notes + [
        "dpapprox: approximation -- the mean-log statistic is modelled by its CLT normal "
        f"N(mu_alpha, Sigma_alpha / {N}) and the censoring at a = {dpss.threshold:g} is ignored "
        "(seed 002 model (6)); Laplace noise as a normal scale mixture (exact augmentation)"]
    notes.append(INIT_NOTE if inits is not None else
                 "start: the statistic has no Dirichlet MLE; chain c starts at a draw from the "
                 "prior (dispersed starts)")
    if plan is not None:
        notes.append(plan.note(results[0]["n_stored"]))
    post = make_posterior({"alpha": alpha}, {"accept_rate": acc}, "dpapprox", model, release,
                          notes, exact=False, chain_stats={"start_alpha": starts})
    # warning + note + converged when R-hat > 1.01 or ESS < 400 (fixed draws= included)
    flag(post, stacklevel=4, table=plan.table if plan is not None else None)
    return post
