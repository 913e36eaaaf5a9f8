"""Sufficient-statistic Gibbs sampler for conjugate exponential families (seed 003, ch. 4).

Model (Bernstein & Sheldon's Fig. 4.1, generalised to a released *linear function* of the
latent statistic)::

    theta ~ conjugate prior
    u | theta ~ N(m(theta), V(theta))   restricted to the valid polytope   (CLT; latent u)
    omega_j ~ Exp(rate 1/(2 b^2))                                          (Laplace noise only)
    y | u, omega ~ N(A u + c, diag(omega))      (Gaussian noise: omega_j = sigma^2, fixed)

and the full conjugate statistic ``s = S(u)`` is a fixed linear function of ``u``. One Gibbs
iteration (all chains at once, cost independent of n):

1. ``u | theta, omega, y``: Gaussian conditioning (the thesis's ``NormProduct``, in Kalman
   form) followed by a draw of the truncated normal on the valid polytope
   (:func:`~privpost.inference._gibbs_core.constrained_mvn`: rejection, then an exact
   coordinate-wise Gibbs sweep -- never hangs);
2. ``omega | u, y`` (Laplace only): ``1/omega_j ~ IG(mean 1/(b |y_j - (A u + c)_j|),
   shape 1/b^2)`` (seed 003 App. B.2);
3. ``theta | u``: exact conjugate draw given ``s = S(u)`` and ``n``.

Supported (model, query) pairs and their latent ``u``:

* BetaBernoulli on ``Sum(bounds)`` or ``Mean(bounds, n)``: ``u`` = number of ones in
  ``[0, n]``; clamping of 0/1 records into the bounds is an affine map, so it is exact;
* DirichletCategorical on ``Histogram(K)``: ``u`` = first K-1 counts (``u >= 0``,
  ``sum u <= n``); all K noisy counts are used (the K-th is ``n - sum u`` plus noise);
* ExponentialGamma / PoissonGamma on ``TruncatedSum(bounds, "identity")``: ``u`` = the segment
  sums (lower tail, released centre, upper tail) with the **joint** random-sum CLT
  (:func:`~privpost.inference.expfam.segment_clt`), drawn as one block, so ``s = sum(u)``
  always holds (the thesis draws ``s`` and the centre sum separately and lets them disagree,
  and drops the segments' cross-covariances -- extract §2.4 remarks i-ii).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from privpost._rng import as_generator
from privpost.errors import IncompatibleError
from privpost.inference import _gibbs_core as core
from privpost.inference import expfam
from privpost.inference._gibbs_common import NoiseModel, Progress, noise_model

__all__ = ["ExpfamProblem", "build_problem", "init_state", "gibbs_step", "sample"]


def _query_kind(query) -> str:
    import re

    name = getattr(query, "name", None) or type(query).__name__
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


@dataclass
class ExpfamProblem:
    """Everything the Gibbs step needs, as arrays (see the module docstring for the model).

    ``clt(theta) -> (m (C, k), V (C, k, k))``; ``full_stat(u (C, k)) -> s (C, kf)``.
    """

    family: expfam.Family
    param: str
    prior: dict
    n: int
    y: np.ndarray
    A: np.ndarray
    c: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    total: float | None
    noise: NoiseModel
    clt: Callable
    full_stat: Callable
    segment_labels: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)


def _single_param(model) -> str:
    names = list(getattr(model, "param_shapes", {}) or {})
    if len(names) != 1:
        raise IncompatibleError(f"gibbs-ss expects a one-parameter conjugate model, "
                                f"{type(model).__name__} has parameters {names}")
    return names[0]


def build_problem(model, release) -> ExpfamProblem:
    """Translate (model, release) into an :class:`ExpfamProblem` (IncompatibleError if not
    supported)."""
    fam = expfam.family_for(model)
    if fam is None:
        raise IncompatibleError(
            f"gibbs-ss has no exponential-family table for {type(model).__name__}; supported: "
            "BetaBernoulli (Sum/Mean), DirichletCategorical (Histogram), ExponentialGamma and "
            "PoissonGamma (TruncatedSum), LinearRegression (RegressionStats); use "
            "method='damcmc' for other models")
    query = release.query
    kind = _query_kind(query)
    n = int(release.n)
    y = np.asarray(release.observed, dtype=np.float64)
    noise = noise_model(release)
    prior = fam.prior(model)
    param = _single_param(model)
    notes: list[str] = []

    if fam.kind == "bernoulli":
        if kind not in ("sum", "mean"):
            raise IncompatibleError(
                f"gibbs-ss fits BetaBernoulli to a Sum or Mean release of the 0/1 records, "
                f"not {getattr(query, 'name', kind)!r}")
        lo_b, hi_b = (float(v) for v in query.bounds)
        c0 = min(max(0.0, lo_b), hi_b)           # t(0): record 0 clamped into the bounds
        c1 = min(max(1.0, lo_b), hi_b)           # t(1)
        denom = float(query.n) if kind == "mean" else 1.0
        A = np.array([[(c1 - c0) / denom]])
        c = np.array([n * c0 / denom])
        if (c0, c1) != (0.0, 1.0):
            notes.append(f"the query clamps 0/1 records to [{lo_b:g}, {hi_b:g}] (t(0) = {c0:g}, "
                         f"t(1) = {c1:g}); this affine map is modelled exactly")

        def clt(theta):
            mu, Sig = expfam.bernoulli_moments(theta)
            return n * mu, n * Sig

        return ExpfamProblem(fam, param, prior, n, y, A, c, np.zeros(1), np.full(1, float(n)),
                             None, noise, clt, lambda u: u, notes=notes)

    if fam.kind == "categorical":
        if kind != "histogram":
            raise IncompatibleError(f"gibbs-ss fits DirichletCategorical to a Histogram release, "
                                    f"not {getattr(query, 'name', kind)!r}")
        K = int(query.categories)
        if np.shape(prior["alpha"]) != (K,):
            raise IncompatibleError(f"the Dirichlet prior has {np.size(prior['alpha'])} "
                                    f"categories but the Histogram has {K}")
        A = np.vstack([np.eye(K - 1), -np.ones((1, K - 1))])
        c = np.zeros(K)
        c[-1] = n

        def clt(theta):
            mu, Sig = expfam.categorical_moments(theta)
            return n * mu, n * Sig

        def full_stat(u):
            return np.concatenate([u, n - u.sum(axis=-1, keepdims=True)], axis=-1)

        return ExpfamProblem(fam, param, prior, n, y, A, c, np.zeros(K - 1),
                             np.full(K - 1, float(n)), float(n), noise, clt, full_stat,
                             notes=notes)

    # unbounded families: truncated sums
    if kind != "truncatedsum":
        raise IncompatibleError(
            f"gibbs-ss fits {type(model).__name__} to a TruncatedSum release (records outside "
            f"the interval dropped; seed 003 §4.3), not {getattr(query, 'name', kind)!r}; "
            "method='damcmc' handles clamped sums")
    if getattr(query, "transform", "identity") != "identity":
        raise IncompatibleError(f"{type(model).__name__} has sufficient statistic x; the "
                                f"TruncatedSum releases {query.transform}(x)")
    v, w = (float(b) for b in query.bounds)
    if fam.kind == "exponential":
        if w <= 0:
            raise IncompatibleError(f"TruncatedSum bounds ({v:g}, {w:g}) exclude the whole "
                                    "support (0, inf) of the exponential")
        segs = []
        if v > 0:
            segs.append(("lower", 0.0, v))
        segs.append(("centre", max(v, 0.0), w))
        segs.append(("upper", w, math.inf))
        moments = expfam.exponential_interval_moments
        his = [n * s[2] for s in segs]
    else:
        lo_i, hi_i = math.ceil(v), math.floor(w)
        if hi_i < max(lo_i, 0):
            raise IncompatibleError(f"TruncatedSum bounds ({v:g}, {w:g}) contain no "
                                    "non-negative integer")
        segs = []
        if lo_i >= 1:
            segs.append(("lower", 0, lo_i - 1))
        segs.append(("centre", max(lo_i, 0), hi_i))
        segs.append(("upper", hi_i + 1, math.inf))
        moments = expfam.poisson_interval_moments
        his = [n * float(s[2]) for s in segs]
    R = len(segs)
    centre = [i for i, s in enumerate(segs) if s[0] == "centre"][0]
    A = np.zeros((1, R))
    A[0, centre] = 1.0
    c = np.zeros(1)

    def clt(theta):
        q = np.empty((theta.shape[0], R))
        mu = np.empty_like(q)
        var = np.empty_like(q)
        for r, (_, a, b) in enumerate(segs):
            q[:, r], mu[:, r], var[:, r] = moments(theta, a, b)
        return expfam.segment_clt(n, q, mu, var)

    notes.append("truncated sum: latent lower-tail / centre / upper-tail sums with the joint "
                 "random-sum CLT (cross-covariances kept, so their total has variance "
                 "n Var[x]); records outside the interval are dropped by the query")
    return ExpfamProblem(fam, param, prior, n, y, A, c, np.zeros(R), np.array(his), None, noise,
                         clt, lambda u: u.sum(axis=-1, keepdims=True),
                         segment_labels=tuple(s[0] for s in segs), notes=notes)


# ------------------------------------------------------------------------------------------
# state, step, loop
# ------------------------------------------------------------------------------------------

@dataclass
class State:
    theta: np.ndarray       # (C,) or (C, K)
    u: np.ndarray           # (C, k) latent statistic
    omega: np.ndarray       # (C, d) noise variances
    fallback: np.ndarray    # (C,) bool: last u-step used coordinate Gibbs
    log_step: np.ndarray | None = None   # (C,) log random-walk scale of the collapsed step
    accept: np.ndarray | None = None     # (C,) acceptance of the last collapsed step


def _prior_batch(prior, C):
    return {k: np.broadcast_to(np.asarray(v, dtype=np.float64),
                               (C,) + np.shape(v)).copy() for k, v in prior.items()}


def initial_theta(rng, prob: ExpfamProblem, chains: int):
    """Starting parameters: a draw from the plug-in (naive) posterior given the noisy statistic
    projected into the valid range (bounded families), or from the prior (truncated families,
    whose collapsed step finds its way from anywhere). Starting from the prior can cost
    thousands of iterations at large n: the Laplace mixture explains a far-off statistic by a
    huge noise variance and the chain creeps back."""
    if prob.family.kind == "bernoulli":
        a = prob.A[0, 0]
        S = prob.n / 2.0 if a == 0 else float(np.clip((prob.y[0] - prob.c[0]) / a, 0, prob.n))
        post = prob.family.posterior(prob.prior, np.full((chains, 1), S), prob.n)
        return prob.family.draw(rng, post)
    if prob.family.kind == "categorical":
        cnt = np.clip(prob.y, 0, prob.n)
        post = prob.family.posterior(prob.prior, np.broadcast_to(cnt, (chains, cnt.size)),
                                     prob.n)
        return prob.family.draw(rng, post)
    return prob.family.draw(rng, _prior_batch(prob.prior, chains))


def init_state(rng, prob: ExpfamProblem, chains: int) -> State:
    """Initial state: theta from :func:`initial_theta`, u at its CLT mean (clipped into the
    polytope), omega from its prior (Laplace) or fixed at sigma^2 (Gaussian)."""
    theta = initial_theta(rng, prob, chains)
    m, _ = prob.clt(theta)
    u = np.clip(m, prob.lo, prob.hi)
    if prob.total is not None:
        s = u.sum(axis=-1, keepdims=True)
        u = np.where(s > prob.total, u * prob.total / np.maximum(s, 1e-300), u)
    d = prob.y.shape[0]
    if prob.noise.kind == "laplace":
        omega = core.laplace_mixture_prior(rng, prob.noise.scale, (chains, d))
    else:
        omega = np.full((chains, d), prob.noise.scale ** 2)
    log_step = np.full(chains, math.log(0.1)) if prob.segment_labels else None
    return State(theta, u, omega, np.zeros(chains, dtype=bool), log_step,
                 np.zeros(chains) if prob.segment_labels else None)


def collapsed_log_target(prob: ExpfamProblem, log_theta, omega):
    """``log p(log theta | y, omega)`` up to a constant under the CLT model with the latent
    statistic integrated out: ``p(theta) N(y; A m + c, A V A^T + diag omega) theta`` (Gamma
    prior on a rate; the last factor is the Jacobian of ``log theta``). Truncated families."""
    theta = np.exp(log_theta)
    m, V = prob.clt(theta)
    mean = m @ prob.A.T + prob.c                           # (C, d)
    S = prob.A @ V @ prob.A.T
    S = S + omega[:, :, None] * np.eye(S.shape[-1])
    r = prob.y[None, :] - mean
    sign, logdet = np.linalg.slogdet(S)
    quad = np.einsum("ci,ci->c", r, np.linalg.solve(S, r[..., None])[..., 0])
    shape, rate = prob.prior["shape"], prob.prior["rate"]
    logprior = shape * log_theta - rate * theta            # includes the Jacobian theta
    out = logprior - 0.5 * (logdet + quad)
    return np.where(np.isfinite(out) & (sign > 0), out, -np.inf)


def collapsed_theta_step(rng, prob: ExpfamProblem, state: State, adapt: bool, it: int):
    """Random-walk Metropolis on ``log theta`` targeting :func:`collapsed_log_target`.

    Needed for the truncated families: the thesis's scheme updates theta only through the full
    statistic ``s = s_lower + s_centre + s_upper``, and the unobserved tail sums, redrawn from
    their CLT law given theta, move together with theta, so the chain crawls when the tails hold
    much of the mass. This step moves theta given the observed value alone. The scale adapts
    (Robbins-Monro towards acceptance 0.44) during warm-up only.
    """
    lt = np.log(state.theta)
    cur = collapsed_log_target(prob, lt, state.omega)
    # symmetric mixture of a tuned and a 10x wider random walk: the wide moves let the chain
    # hop between the two branches a truncated sum can leave (see collapsed_log_target)
    wide = rng.random(lt.shape) < 0.2
    scale = np.exp(state.log_step) * np.where(wide, 10.0, 1.0)
    prop = lt + scale * rng.standard_normal(lt.shape)
    new = collapsed_log_target(prob, prop, state.omega)
    acc = np.log(rng.random(lt.shape)) < new - cur
    theta = np.where(acc, np.exp(prop), state.theta)
    log_step = state.log_step
    if adapt:
        gain = 1.0 / math.sqrt(it + 1.0)
        log_step = np.where(wide, log_step, log_step + gain * (acc.astype(float) - 0.44))
    return theta, log_step, acc.astype(float)


def gibbs_step(rng, prob: ExpfamProblem, state: State, adapt: bool = False, it: int = 0) -> State:
    """One Gibbs iteration (u, then omega, then theta) for all chains; truncated families
    start with a collapsed Metropolis step for theta (:func:`collapsed_theta_step`)."""
    log_step, accept = state.log_step, state.accept
    if prob.segment_labels:
        theta0, log_step, accept = collapsed_theta_step(rng, prob, state, adapt, it)
        state = State(theta0, state.u, state.omega, state.fallback, log_step, accept)
    m, V = prob.clt(state.theta)
    mean, cov = core.condition_linear_gaussian(m, V, prob.A, prob.c, prob.y, state.omega)
    u, fb = core.constrained_mvn(rng, mean, cov, state.u, prob.lo, prob.hi, prob.total)
    if prob.noise.kind == "laplace":
        resid = prob.y[None, :] - u @ prob.A.T - prob.c[None, :]
        omega = core.laplace_mixture_variances(rng, resid, prob.noise.scale)
    else:
        omega = state.omega
    post = prob.family.posterior(prob.prior, prob.full_stat(u), prob.n)
    theta = prob.family.draw(rng, post)
    return State(theta, u, omega, fb, log_step, accept)


def sample(prob: ExpfamProblem, *, draws: int, warmup: int, chains: int, seed=None,
           progress: bool = False, compiled: bool = True):
    """Run the sampler; returns ``(theta (C, D, ...), stats dict)``.

    The beta-binomial runs a compiled loop (:mod:`privpost.inference._gibbs_fast`) unless
    ``compiled=False`` (same algorithm in NumPy; the tests compare the two).
    """
    rng = as_generator(seed)
    if compiled and prob.family.kind == "bernoulli":
        try:
            from privpost.inference import _gibbs_fast
        except ImportError:  # pragma: no cover - Numba is a dependency
            _gibbs_fast = None
        if _gibbs_fast is not None:
            theta, S = _gibbs_fast.binomial_chains(
                rng, theta0=initial_theta(rng, prob, chains), n=prob.n, y=prob.y[0], a=prob.A[0, 0], c=prob.c[0],
                prior_a=prob.prior["a"], prior_b=prob.prior["b"], scale=prob.noise.scale,
                laplace=prob.noise.kind == "laplace", warmup=warmup, draws=draws, chains=chains)
            Progress(warmup + draws, progress, "gibbs-ss").update(warmup + draws - 1)  # compiled
            return theta, {"stat": S, "fallback": np.zeros((chains, draws), dtype=bool)}
    state = init_state(rng, prob, chains)
    theta_out = np.empty((chains, draws) + state.theta.shape[1:])
    kf = prob.full_stat(state.u).shape[-1]
    stat_out = np.empty((chains, draws, kf))
    u_out = np.empty((chains, draws, state.u.shape[1]))
    fb_out = np.zeros((chains, draws), dtype=bool)
    acc_out = np.zeros((chains, draws))
    bar = Progress(warmup + draws, progress, "gibbs-ss")
    for it in range(warmup + draws):
        state = gibbs_step(rng, prob, state, adapt=it < warmup, it=it)
        j = it - warmup
        if j >= 0:
            theta_out[:, j] = state.theta
            stat_out[:, j] = prob.full_stat(state.u)
            u_out[:, j] = state.u
            fb_out[:, j] = state.fallback
            if state.accept is not None:
                acc_out[:, j] = state.accept
        bar.update(it)
    stats = {"stat": stat_out[..., 0] if kf == 1 else stat_out,
             "fallback": fb_out}
    if prob.segment_labels:
        stats["segment_sums"] = u_out
        stats["accept_theta"] = acc_out
    return theta_out, stats
