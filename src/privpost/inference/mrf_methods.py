"""Methods for a :class:`~privpost.models.mrf.CliqueMRF` on a noisy
:class:`~privpost.queries.marginal_tables.MarginalTables` release (seed 003 ch. 3, extract §1.3-1.4).

* ``naive`` on an MRF (:func:`run_naive`, reached through ``method="naive"``): the noise-naive
  MLE of extract §1.3 -- pseudo-marginals ``y/N``, per-clique Euclidean projection onto the
  simplex (``project=True``, Duchi et al. 2008), then ``argmax theta'(N mu~) - N A(theta) -
  ridge ||theta||^2``. A **point estimate** (one draw), not a posterior.
* ``cgm-em`` (:func:`run_cgm_em`): EM for collective graphical models, extract Algorithms 1-2,
  with the E-step by non-linear belief propagation (NLBP). A point estimate.
* ``mrf-laplace`` (:func:`run_laplace`): a fast **approximate** Gaussian posterior
  (Laplace approximation of a CLT likelihood, in the spirit of NAPSU-MQ and Gibbs-SS).
* ``damcmc`` needs nothing here: the tables are record-additive, so the generic DA-MCMC sampler
  runs with the MRF as record model (exact).

Choices the thesis leaves open (extract §1.4, §9), made here and recorded in ``Posterior.notes``:

* EM initialisation: the naive estimate (the thesis's Ch. 6 suggestion).
* NLBP initial ``n``: ``N mu(theta)`` (then the previous E-step's ``n``); damping ``alpha``
  (default 0.5), halved whenever the fixed-point residual ``max |n' - n|`` grows (the Huber
  gradient is steep, and a fixed damping oscillates when ``N Cov(t) / (delta b)`` is large);
  stop when the largest change of a cell is below ``tol * N`` (default ``1e-6 N``) or after
  ``max_nlbp`` iterations (default 300, a warning note if reached).
* The Laplace log-likelihood's gradient ``sign(y - n)/b`` is non-smooth at ``y = n``: the E-step
  uses its Huber smoothing of half-width ``delta = huber * b`` (default ``huber = 0.1``), i.e. the
  gradient ``clip((y - n)/delta, -1, 1)/b`` -- the exact sign outside ``|y - n| < delta``.
  Gaussian noise: the exact gradient ``(y - n)/sigma^2``. Discrete noise is treated as its
  continuous counterpart of the same scale (noted).
* "Standard BP" inside NLBP is exact junction-tree inference (``CliqueMRF.marginals``); so on
  loopy graphs NLBP solves Eq. 3.6 with the *exact* entropy of the model family (the
  stationarity condition ``n = N mu(theta + grad log p(y|n))``) instead of the Bethe one.
* M-step: ``argmax theta'n - N A(theta) - ridge ||theta||^2`` by BFGS on the exact gradient
  ``n - N mu(theta) - 2 ridge theta`` (no closed form is used on purpose: the same code serves
  loopy graphs). The default ``ridge`` is the model prior's ``1/(2 prior_sd^2)`` in both naive and
  EM, so both give MAP-type estimates under the same penalty.
* EM stops when the largest change of the model's clique marginals is below ``em_tol``
  (default 1e-4) or after ``max_em`` iterations (default 100).
"""

from __future__ import annotations

import math
import time

import numpy as np

from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import reject_release_set
from privpost.inference._gibbs_common import (check_sampler_options, make_posterior,
                                              noise_model, reject_unknown)
from privpost.queries.marginal_tables import project_simplex

__all__ = ["run_naive", "run_cgm_em", "run_laplace", "fit_mle", "naive_estimate", "cgm_em",
           "nlbp", "is_mrf"]


def is_mrf(model) -> bool:
    return getattr(model, "name", None) == "mrf" and hasattr(model, "release_tables")


def _setup(model, release, method):
    reject_release_set(method, release)
    if not is_mrf(model):
        raise IncompatibleError(f"method {method!r} needs the 'mrf' model (CliqueMRF), got "
                                f"{getattr(model, 'name', type(model).__name__)!r}")
    for attr in ("query", "mechanism", "n", "observed"):
        if not hasattr(release, attr):
            raise IncompatibleError(f"method {method!r} needs a Release, got "
                                    f"{type(release).__name__}")
    y = model.release_tables(release.query, np.asarray(release.observed, dtype=np.float64))
    if not np.all(np.isfinite(y)):
        raise IncompatibleError("release.observed contains non-finite values")
    nm = noise_model(release)
    N = int(release.n)
    if N < 1:
        raise IncompatibleError(f"release.n must be >= 1, got {N}")
    return y, float(N), nm


def _ridge(model, ridge):
    if ridge is None:
        return 1.0 / (2.0 * model.prior_sd ** 2)
    try:
        r = float(ridge)
    except (TypeError, ValueError):
        raise PrivpostError(f"ridge must be a number >= 0, got {ridge!r}") from None
    if not (r >= 0 and math.isfinite(r)):
        raise PrivpostError(f"ridge must be a finite number >= 0, got {ridge!r}")
    return r


def _pos(name, value, integer=False):
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.number))
    if isinstance(value, bool) or not ok or not (value > 0) or not math.isfinite(float(value)):
        kind = "an integer >= 1" if integer else "a finite number > 0"
        raise PrivpostError(f"{name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


# ============================================================================================
# M-step / MLE
# ============================================================================================

def fit_mle(model, counts, N, ridge, theta0=None) -> np.ndarray:
    """``argmax_theta theta' counts - N A(theta) - ridge ||theta||^2``, flat ``(d,)``.

    ``counts`` ``(d,)`` (cell vector in the model's layout, each table summing to ``N``; any
    nonnegative reals). Concave. ``theta = B z + w`` with ``B`` the model's identified basis
    (:meth:`CliqueMRF.identified_basis`): ``A`` depends on ``z`` only and ``w' t(x)`` is the same
    for every record ``x``, so the objective separates. ``w`` (unidentified: it does not change
    the distribution) has the closed form ``P_null (counts - N t(x_0)) / (2 ridge)`` -- nonzero
    only when the tables are mutually inconsistent, as projected pseudo-marginals are -- and
    ``0`` when ``ridge = 0``. ``z`` is found by BFGS on the exact gradient
    ``B'(counts - N mu) - 2 ridge z``, preconditioned by the curvature ``N lam_k + 2 ridge``
    at ``theta = 0``. With ``ridge = 0`` and a zero count the maximiser does not exist (extract
    §1.3 pathology 3): the optimiser then stops at a large finite ``z``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    B, lam_k = model.identified_basis()
    scale = np.sqrt(N * lam_k + 2.0 * ridge + 1e-12 * N)
    z0 = np.zeros(B.shape[1]) if theta0 is None else B.T @ np.asarray(theta0, dtype=np.float64)

    def f(u):
        z = u / scale
        a, mu = model.marginals(B @ z)
        val = (B @ z) @ counts - N * a - ridge * z @ z
        grad = B.T @ (counts - N * mu) - 2.0 * ridge * z
        return -val / N, -(grad / scale) / N

    # BFGS, not L-BFGS-B: with r of tens to hundreds L-BFGS-B's setulb cost ~3 ms a call here
    from scipy.optimize import minimize   # not at module level: it costs ~0.5 s to import

    res = minimize(f, z0 * scale, jac=True, method="BFGS",
                   options={"maxiter": 5000, "gtol": 1e-9})
    z = res.x / scale
    theta = B @ z
    if ridge > 0:
        x0 = np.zeros((1, len(model.levels)), dtype=np.int64)
        r = counts - N * model.counts(x0)
        theta = theta + (r - B @ (B.T @ r)) / (2.0 * ridge)
    return theta


def naive_estimate(model, y, N, ridge, project=True) -> tuple[np.ndarray, np.ndarray]:
    """Noise-naive MLE (extract §1.3): returns ``(theta (d,), mu~ (d,))``."""
    mu = np.asarray(y, dtype=np.float64) / N
    if project:
        parts = [project_simplex(mu[o:o + s]) for o, s in zip(model.offsets, model.sizes)]
        mu = np.concatenate(parts)
    return fit_mle(model, N * mu, N, ridge), mu


# ============================================================================================
# NLBP and EM
# ============================================================================================

def _grad_loglik(y, n, nm, huber):
    r = y - n
    if nm.kind == "laplace":
        delta = huber * nm.scale
        return np.clip(r / delta, -1.0, 1.0) / nm.scale
    return r / nm.scale ** 2


def nlbp(model, theta, y, N, nm, *, alpha=0.5, tol=1e-6, max_iter=300, huber=0.1, n0=None):
    """Algorithm 1 (NLBP): approximate ``argmax_n theta'n + H(n) + log p(y | n)``.

    Returns ``(n (d,), iterations, converged)``; ``n`` lies in the scaled marginal polytope
    (it is a damped average of ``N mu(.)`` vectors).
    """
    n = N * model.marginals(theta)[1] if n0 is None else np.array(n0, dtype=np.float64)
    prev = np.inf
    for it in range(1, max_iter + 1):
        shifted = theta + _grad_loglik(y, n, nm, huber)
        new = N * model.marginals(shifted)[1]
        resid = float(np.max(np.abs(new - n)))
        if resid > prev:            # oscillation: halve the damping (adaptive; never below 1e-3)
            alpha = max(alpha / 2.0, 1e-3)
        prev = resid
        n = n + alpha * (new - n)
        if alpha * resid < tol * N:
            return n, it, True
    return n, max_iter, False


def cgm_em(model, y, N, nm, *, ridge, theta0, alpha=0.5, tol=1e-6, max_nlbp=300, huber=0.1,
           em_tol=1e-4, max_em=100, progress=False):
    """Algorithm 2 (EM for CGMs). Returns ``(theta, info dict)``."""
    theta = np.array(theta0, dtype=np.float64)
    mu_old = model.marginals(theta)[1]
    n = None
    info = {"em_iterations": 0, "nlbp_iterations": [], "nlbp_unconverged": 0, "converged": False}
    for it in range(1, max_em + 1):
        n, k, ok = nlbp(model, theta, y, N, nm, alpha=alpha, tol=tol, max_iter=max_nlbp,
                        huber=huber, n0=n)
        info["nlbp_iterations"].append(k)
        info["nlbp_unconverged"] += int(not ok)
        theta = fit_mle(model, n, N, ridge, theta0=theta)
        mu = model.marginals(theta)[1]
        change = float(np.max(np.abs(mu - mu_old)))
        mu_old = mu
        info["em_iterations"] = it
        if progress:
            print(f"[cgm-em] iteration {it}: max marginal change {change:.3g}", flush=True)
        if change < em_tol:
            info["converged"] = True
            break
    return theta, info


# ============================================================================================
# run functions (Posterior objects)
# ============================================================================================

def _point_posterior(model, release, theta, method, notes):
    draws = {nm: v[None, None] for nm, v in model.unflatten(theta).items()}
    notes = list(notes) + ["point estimate: one draw, not a posterior sample (sd, intervals, "
                           "r_hat and ESS are meaningless); use method='damcmc' for the exact "
                           "posterior or 'mrf-laplace' for an approximate one"]
    return make_posterior(draws, {}, method, model, release, notes, exact=False)


def run_naive(model, release, *, ridge=None, project=True, seed=None, progress=False,
              draws=None, chains=None, warmup=None, **options):
    """``method="naive"`` for a CliqueMRF: the noise-naive (projected, ridge) MLE.

    Options: ``ridge`` (lambda >= 0; default ``1/(2 prior_sd^2)``), ``project`` (simplex
    projection per clique, default True). ``draws``/``chains``/``warmup``/``seed``/``progress``
    are accepted for interface compatibility and ignored (a point estimate).
    """
    reject_unknown("naive", options)
    y, N, nm = _setup(model, release, "naive")
    lam = _ridge(model, ridge)
    theta, mu = naive_estimate(model, y, N, lam, bool(project))
    notes = [f"noise-naive MLE (Bernstein 2017 / seed 003 §3.2.2-3.2.3): pseudo-marginals y/N "
             f"{'projected per clique onto the simplex' if project else 'not projected'}, ridge "
             f"lambda = {lam:g}; the noise is ignored"]
    return _point_posterior(model, release, theta, "naive", notes)


def run_cgm_em(model, release, *, ridge=None, alpha=0.5, tol=1e-6, max_nlbp=300, huber=0.1,
               em_tol=1e-4, max_em=100, project=True, seed=None, progress=False, draws=None,
               chains=None, warmup=None, **options):
    """``method="cgm-em"``: EM with NLBP E-step (extract Algorithms 1-2). See module docstring
    for the options and the choices made."""
    reject_unknown("cgm-em", options)
    y, N, nm = _setup(model, release, "cgm-em")
    lam = _ridge(model, ridge)
    alpha = _pos("alpha", alpha)
    if alpha > 1:
        raise PrivpostError(f"alpha (NLBP damping) must be in (0, 1], got {alpha}")
    t0 = time.perf_counter()
    theta0, _ = naive_estimate(model, y, N, lam, bool(project))
    theta, info = cgm_em(model, y, N, nm, ridge=lam, theta0=theta0, alpha=alpha,
                         tol=_pos("tol", tol), max_nlbp=_pos("max_nlbp", max_nlbp, True),
                         huber=_pos("huber", huber), em_tol=_pos("em_tol", em_tol),
                         max_em=_pos("max_em", max_em, True), progress=bool(progress))
    notes = [f"CGM-EM (seed 003 §3.2.4, Algorithms 1-2): init = naive MLE, NLBP damping "
             f"{alpha:g}, {'Huber-smoothed Laplace gradient (delta = ' + format(huber, 'g') + ' b)' if nm.kind == 'laplace' else 'Gaussian gradient'}, "
             f"exact junction-tree inference inside NLBP, M-step ridge {lam:g}; "
             f"{info['em_iterations']} EM iterations in {time.perf_counter() - t0:.2g} s"]
    if nm.approximate:
        notes.append(nm.approximate)
    if not info["converged"]:
        notes.append(f"warning: EM stopped after max_em = {max_em} iterations without reaching "
                     f"em_tol = {em_tol:g}")
    if info["nlbp_unconverged"]:
        notes.append(f"warning: NLBP hit max_nlbp = {max_nlbp} in {info['nlbp_unconverged']} "
                     f"E-step(s); lower alpha or raise max_nlbp")
    return _point_posterior(model, release, theta, "cgm-em", notes)


def run_laplace(model, release, *, draws=1000, chains=1, seed=None, ridge=None, progress=False,
                warmup=None, **options):
    """``method="mrf-laplace"``: approximate Gaussian posterior of the log-potentials.

    Approximations (all stated in ``Posterior.notes``): the released tables are taken as
    ``y ~ N(N mu(theta), W^{-1})`` with ``W^{-1} = N Sigma^ + s^2 I`` -- the CLT for the cell
    counts (``Sigma^ = Cov(t)`` at the naive estimate, held fixed) plus noise of the same
    variance ``s^2`` as the mechanism's (Laplace ``2 b^2``); the prior is the model's Gaussian.
    Only the identified part ``z = B'theta`` meets this likelihood (see :mod:`privpost.models.mrf`);
    its mode is found by BFGS (gradient ``N B' Cov_theta(t) W r - z/prior_sd^2``, the
    ``Cov_theta(t) W r`` product by a central difference of ``mu`` along ``W r``); its
    covariance is the inverse Gauss-Newton Hessian ``N^2 B' S W S B + I/prior_sd^2`` with
    ``S = Cov(t)`` at the mode. The unidentified part is drawn from its prior, which is its
    exact posterior. Cost: one ``Cov(t)`` per evaluation
    (exact, one junction-tree pass per cell) -- meant for tables too large for damcmc's ``n``,
    not for very many cells.
    """
    from privpost._rng import as_generator

    reject_unknown("mrf-laplace", options)
    draws, _, chains = check_sampler_options(draws, 0, chains)
    y, N, nm = _setup(model, release, "mrf-laplace")
    lam = _ridge(model, ridge)
    theta_naive, _ = naive_estimate(model, y, N, lam, True)
    s2 = 2.0 * nm.scale ** 2 if nm.kind == "laplace" else nm.scale ** 2
    sigma_hat = model.cell_covariance(theta_naive)
    W = np.linalg.inv(N * sigma_hat + s2 * np.eye(model.dim))
    ps2 = model.prior_sd ** 2
    B, lam_k = model.identified_basis()
    scale = np.sqrt(N * lam_k + 1.0 / ps2)

    def f(u):
        z = u / scale
        th = B @ z
        _, mu = model.marginals(th)
        r = y - N * mu
        v = W @ r
        # Cov_theta(t) v = d/dh mu(theta + h v) at h = 0 (central difference: 2 passes, not d)
        h = 1e-5 / max(float(np.max(np.abs(v))), 1e-300)
        jv = (model.marginals(th + h * v)[1] - model.marginals(th - h * v)[1]) / (2 * h)
        val = -0.5 * r @ v - 0.5 * z @ z / ps2
        grad = N * (B.T @ jv) - z / ps2
        return -val, -grad / scale

    z0 = B.T @ theta_naive
    from scipy.optimize import minimize   # not at module level: it costs ~0.5 s to import

    res = minimize(f, z0 * scale, jac=True, method="BFGS",
                   options={"maxiter": 1000, "gtol": 1e-6})
    z_mode = res.x / scale
    S = model.cell_covariance(B @ z_mode)
    H = N * N * B.T @ S @ W @ S @ B + np.eye(B.shape[1]) / ps2
    L = np.linalg.cholesky(np.linalg.inv(0.5 * (H + H.T)))
    rng = as_generator(seed)
    zz = z_mode + rng.standard_normal((chains, draws, B.shape[1])) @ L.T
    xi = model.prior_sd * rng.standard_normal((chains, draws, model.dim))
    th = zz @ B.T + (xi - (xi @ B) @ B.T)       # unidentified part: exactly its prior
    out = {nm_: th[..., o:o + sz].reshape((chains, draws) + sh) for nm_, o, sz, sh in
           zip(model.names, model.offsets, model.sizes, model.shapes)}
    notes = ["approximate: Laplace approximation (Gauss-Newton) of a CLT likelihood y ~ "
             "N(N mu(theta), N Sigma^ + s^2 I) with Sigma^ = Cov(t) at the naive estimate and "
             f"noise variance s^2 = {s2:.4g} matched to the mechanism; not exact -- use damcmc "
             "for the exact posterior on small problems",
             f"optimiser: {res.message if isinstance(res.message, str) else res.message!r} "
             f"({res.nit} iterations)"]
    if nm.approximate:
        notes.append(nm.approximate)
    return make_posterior(out, {}, "mrf-laplace", model, release, notes, exact=False)
