"""Sufficient-statistic Gibbs sampler for Bayesian linear regression (seed 003, ch. 5).

The release is a :class:`~privpost.queries.RegressionStats` release: records ``(x, y)`` are
clamped to public bounds and mapped to ``[-1, 1]`` (``z~ = (z - c) / h`` with centre ``c`` and
half-width ``h``), and the ``d`` unique entries of ``x~^T y~``, ``y~^T y~`` and ``x~^T x~``
(without the constant ``n``) get noise. The model (``LinearRegression``) lives on the original
scale.

Model (Bernstein & Sheldon's Fig. 5.2)::

    (beta, sigma2) ~ prior;  covariate moments from one of three sources (below)
    s~ | beta, sigma2 ~ N(n mu_t, n Sigma_t)      (CLT of the normalised statistics; latent)
    omega_j ~ Exp(rate 1/(2 b^2))                  (Laplace noise; Gaussian noise: fixed)
    z | s~, omega ~ N(s~, diag(omega))

**Clamping is ignored by the CLT, as in the thesis**: the normalisation is treated as the affine
map ``z~ = (z - c)/h``, so the normalised statistics are linear in the original-scale ones and
``y~ = beta~^T x~ + e~`` with ``beta~_0 = (beta_0 - c_y + c_x^T beta_{1:}) / h_y``,
``beta~_j = h_xj beta_j / h_y``, ``sigma~^2 = sigma2 / h_y^2``. Records outside the bounds make
this model misspecified (choose bounds wide enough that clamping is rare; ``damcmc`` models
clamping exactly). The only use made of the bounds beyond the affine map is that draws of ``s~``
with an entry outside ``[-n, n]`` are rejected first (every clamped contribution lies in
``[-1, 1]``).

The CLT moments (seed 003 Eq. 5.3, with the extract's correction
``Cov(x_i y, x_j y) = sigma^2 eta_ij + sum_kl theta_k theta_l xi_{ik,jl}``) are computed without
hand-expanded formulas: with ``w = (1, x~, y~) = Q (1, x~, eps)``, ``eps ~ N(0, 1)`` independent,
``E[w^{⊗4}] = Q^{⊗4} E[(1, x~, eps)^{⊗4}]``, and every entry of ``mu_t`` and ``Sigma_t`` is read
off ``E[w^{⊗2}]`` and ``E[w^{⊗4}]``. Tests check this against the thesis's formulas and Monte
Carlo.

Covariate moments (``covariate_moments=``, seed 003 §5.2.4.4):

* ``"prior"``: the model's fixed covariate law ``N(m, S)`` (Isserlis moments, exact, computed
  once; no budget, no data access);
* ``"update"``: the model's normal-inverse-Wishart hyperprior on ``(m, S)``; ``(m, S)`` is
  updated in the sampler from the latent ``x^T x`` block by NIW conjugacy (the thesis's
  conditional-independence reformulation, Fig. 5.3) and the moments recomputed every iteration;
* ``"noisy"``: privately released sample moments of ``x~`` up to order 4, a
  :class:`~privpost.queries.CovariateMoments` release of the same records with the same
  covariate bounds. gibbs-ss then takes a :class:`~privpost.ReleaseSet` of the two releases
  (:func:`release_with_moments` makes one, splitting ε evenly as the thesis does; the set's
  ``total_privacy()`` is the composition), and ``"noisy"`` is the default for such a set.
  The moments (noisy sums / n, projected to a valid moment sequence by
  :func:`project_moments`) are plugged in as population moments: **their noise is not
  modelled**, exactly as in the thesis ("we do not perform inference over the noisy sample
  moments", §5.2.4.4; the cause of Gibbs-SS-Noisy's slight miscalibration in §5.3.2), and the
  Posterior's notes say so.

Validity: every sampled ``s~`` must make ``B~ = [[x~^T x~, x~^T y~], [., y~^T y~]]`` positive
semi-definite (``B~[0, 0] = n``). Draws are rejected until valid (``max_tries``); if none is, the
last draw is projected: the Schur complement ``B~[1:, 1:] - b b^T / n`` (``b = B~[1:, 0]``, the
centred scatter) has its negative eigenvalues clipped, which keeps ``n`` and the sums fixed.
``sample_stats["projected"]`` flags those iterations. A PSD ``B`` guarantees a proper
conjugate posterior (``Lambda_n`` positive definite and ``b_n >= b_0``; extract §3.5).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from privpost._rng import as_generator
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import _gibbs_core as core
from privpost.inference._gibbs_common import (NoiseModel, Progress, make_posterior, noise_model,
                                              reject_unknown)

__all__ = [
    "stat_pairs",
    "gaussian_moment_tensor",
    "moment_tensor_from_monomials",
    "stat_moments",
    "normalised_params",
    "original_stats",
    "project_stats",
    "is_psd_stat",
    "monomial_exponents",
    "project_moments",
    "moments_from_release",
    "release_covariate_moments",
    "release_with_moments",
    "split_release_set",
    "run",
]


# ------------------------------------------------------------------------------------------
# index bookkeeping
# ------------------------------------------------------------------------------------------

def stat_pairs(p: int) -> np.ndarray:
    """Index pairs into ``w = (1, x~_1..x~_p, y~)`` of the RegressionStats coordinates.

    Order of :class:`~privpost.queries.RegressionStats`: ``x~_j y~`` (j = 0..p), ``y~^2``, then
    the upper triangle of ``x~ x~^T`` in row-major order without ``(0, 0)``. Shape ``(d, 2)``.
    """
    e = p + 1
    pairs = [(j, e) for j in range(p + 1)] + [(e, e)]
    iu0, iu1 = np.triu_indices(p + 1)
    pairs += [(int(a), int(b)) for a, b in zip(iu0, iu1) if not (a == 0 and b == 0)]
    return np.array(pairs, dtype=np.int64)


@functools.lru_cache(maxsize=16)
def _g4_standard(k: int) -> np.ndarray:
    """``E[g^{⊗4}]`` for ``g = (1, z_1..z_{k-1})``, ``z`` i.i.d. N(0, 1). Shape ``(k,)*4``.

    Cached (it depends on ``k`` only); the returned array is read-only."""
    G = np.zeros((k,) * 4)
    normal_moment = {0: 1.0, 1: 0.0, 2: 1.0, 3: 0.0, 4: 3.0}
    for idx in itertools.product(range(k), repeat=4):
        val = 1.0
        for j in set(idx):
            if j == 0:
                continue
            val *= normal_moment[idx.count(j)]
        G[idx] = val
    G.flags.writeable = False
    return G


def _apply4(Q, T):
    """``Q^{⊗4} T``: batched ``Q (C, a, i)`` applied to each axis of ``T (C or 1, i, j, k, l)``
    (four single contractions; plain ``einsum`` is fastest for these small tensors)."""
    C = Q.shape[0]
    T = np.broadcast_to(T, (C,) + T.shape[1:])
    T = np.einsum("cai,cijkl->cajkl", Q, T)
    T = np.einsum("cbj,cajkl->cabkl", Q, T)
    T = np.einsum("cxk,cabkl->cabxl", Q, T)
    return np.einsum("cyl,cabxl->cabxy", Q, T)


def gaussian_moment_tensor(m, S) -> np.ndarray:
    """``E[(1, x)^{⊗4}]`` for ``x ~ N(m, S)``; ``m (C, p)``, ``S (C, p, p)`` -> ``(C, p+1, ..)``.

    Computed as ``B^{⊗4} E[g^{⊗4}]`` with ``(1, x) = B (1, z)``, ``B = [[1, 0], [m, L]]``,
    ``L L^T = S`` (equivalent to Isserlis' theorem).
    """
    m = np.asarray(m, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    C, p = m.shape
    w, U = np.linalg.eigh(0.5 * (S + np.swapaxes(S, -1, -2)))
    L = U * np.sqrt(np.maximum(w, 0.0))[:, None, :]
    B = np.zeros((C, p + 1, p + 1))
    B[:, 0, 0] = 1.0
    B[:, 1:, 0] = m
    B[:, 1:, 1:] = L
    G = np.broadcast_to(_g4_standard(p + 1), (C,) + (p + 1,) * 4)
    return _apply4(B, G)


def monomial_exponents(p: int, order: int = 4) -> np.ndarray:
    """All exponent vectors ``a in N^p`` with ``1 <= |a| <= order`` (graded, then lexicographic
    in the order the multiset of covariate indices is enumerated). Shape ``(M, p)``."""
    out = []
    for deg in range(1, order + 1):
        for combo in itertools.combinations_with_replacement(range(p), deg):
            a = np.zeros(p, dtype=np.int64)
            for j in combo:
                a[j] += 1
            out.append(a)
    return np.array(out, dtype=np.int64)


def moment_tensor_from_monomials(exponents, values, p: int) -> np.ndarray:
    """``E[(1, x)^{⊗4}]`` (shape ``(p+1,)*4``) from moments ``E[x^a]`` of the listed exponents."""
    table = {tuple(int(v) for v in a): float(val) for a, val in zip(exponents, values)}
    table[(0,) * p] = 1.0
    T = np.empty((p + 1,) * 4)
    for idx in itertools.product(range(p + 1), repeat=4):
        a = [0] * p
        for j in idx:
            if j:
                a[j - 1] += 1
        T[idx] = table[tuple(a)]
    return T


def _augment_noise(M4x):
    """``E[(1, x, eps)^{⊗4}]`` from ``E[(1, x)^{⊗4}]`` (``eps ~ N(0,1)`` independent)."""
    C = M4x.shape[0]
    k = M4x.shape[1]
    q = k + 1
    e = k
    M2 = M4x[:, :, :, 0, 0]
    Z = np.zeros((C,) + (q,) * 4)
    Z[:, :k, :k, :k, :k] = M4x
    s = slice(0, k)
    Z[:, e, e, s, s] = M2
    Z[:, e, s, e, s] = M2
    Z[:, e, s, s, e] = M2
    Z[:, s, e, e, s] = M2
    Z[:, s, e, s, e] = M2
    Z[:, s, s, e, e] = M2
    Z[:, e, e, e, e] = 3.0
    return Z


def stat_moments(M4x, beta_t, sigma2_t, pairs):
    """Per-record mean and covariance of the normalised regression statistic.

    Parameters
    ----------
    M4x : (C, p+1, p+1, p+1, p+1) -- ``E[(1, x~)^{⊗4}]``
    beta_t : (C, p+1) -- normalised coefficients (intercept first)
    sigma2_t : (C,) -- normalised noise variance
    pairs : (d, 2) -- :func:`stat_pairs`

    Returns ``mu_t (C, d)``, ``Sigma_t (C, d, d)``.
    """
    C, k = beta_t.shape
    q = k + 1
    Z4 = _augment_noise(np.broadcast_to(M4x, (C,) + M4x.shape[1:]))
    Q = np.broadcast_to(np.eye(q), (C, q, q)).copy()
    Q[:, k, :k] = beta_t
    Q[:, k, k] = np.sqrt(np.maximum(sigma2_t, 0.0))
    E4 = _apply4(Q, Z4)
    E2 = E4[:, :, :, 0, 0]
    a, b = pairs[:, 0], pairs[:, 1]
    mu = E2[:, a, b]
    E4p = E4[:, a[:, None], b[:, None], a[None, :], b[None, :]]
    Sigma = E4p - mu[:, :, None] * mu[:, None, :]
    return mu, 0.5 * (Sigma + np.swapaxes(Sigma, -1, -2))


# ------------------------------------------------------------------------------------------
# scale maps
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scaling:
    """``z~ = (z - c) / h`` for the covariates (``cx, hx`` of shape (p,)) and response."""

    cx: np.ndarray
    hx: np.ndarray
    cy: float
    hy: float

    @classmethod
    def from_query(cls, query) -> "Scaling":
        bx = np.asarray(query.bounds_x, dtype=np.float64)
        by = np.asarray(query.bounds_y, dtype=np.float64)
        return cls(0.5 * (bx[:, 0] + bx[:, 1]), 0.5 * (bx[:, 1] - bx[:, 0]),
                   float(0.5 * (by[0] + by[1])), float(0.5 * (by[1] - by[0])))

    def R(self) -> np.ndarray:
        """``(1, x, y) = R (1, x~, y~)``."""
        p = self.cx.shape[0]
        R = np.zeros((p + 2, p + 2))
        R[0, 0] = 1.0
        R[1:p + 1, 0] = self.cx
        R[1:p + 1, 1:p + 1] = np.diag(self.hx)
        R[p + 1, 0] = self.cy
        R[p + 1, p + 1] = self.hy
        return R


def normalised_params(beta, sigma2, sc: Scaling):
    """``(beta~, sigma~^2)`` of the regression of ``y~`` on ``x~`` (see module docstring)."""
    beta = np.asarray(beta, dtype=np.float64)
    bt = np.empty_like(beta)
    bt[..., 0] = (beta[..., 0] - sc.cy + beta[..., 1:] @ sc.cx) / sc.hy
    bt[..., 1:] = beta[..., 1:] * sc.hx / sc.hy
    return bt, np.asarray(sigma2, dtype=np.float64) / sc.hy ** 2


def _gram(query, s_t, n):
    """``B~ (C, p+2, p+2)`` from released-order statistics ``s_t (C, d)``."""
    xty, yty, xtx = query.unpack(s_t, n)
    C = s_t.shape[0]
    k = xtx.shape[-1]
    B = np.empty((C, k + 1, k + 1))
    B[:, :k, :k] = xtx
    B[:, :k, k] = xty
    B[:, k, :k] = xty
    B[:, k, k] = yty
    return B


def original_stats(query, s_t, n, sc: Scaling):
    """Original-scale ``(X^T X (C,k,k), X^T y (C,k), y^T y (C,))`` from normalised statistics
    (``X`` with the intercept column first)."""
    B = _gram(query, np.atleast_2d(s_t), n)
    R = sc.R()
    Bo = R @ B @ R.T
    k = Bo.shape[-1] - 1
    return Bo[:, :k, :k], Bo[:, :k, k], Bo[:, k, k]


def _schur(B, n):
    b = B[:, 1:, 0]
    return B[:, 1:, 1:] - b[:, :, None] * b[:, None, :] / n


def is_psd_stat(query, s_t, n, tol: float = 1e-9) -> np.ndarray:
    """Whether each statistic vector ``s_t (C, d)`` gives a PSD ``B~`` (relative tolerance)."""
    B = _gram(query, np.atleast_2d(s_t), n)
    M = _schur(B, float(n))
    threshold = -tol * max(float(n), 1.0)
    if M.shape[-1] == 2:
        # one covariate: the smallest eigenvalue of a symmetric 2x2 matrix in closed form
        # (the lower triangle, as eigvalsh reads it); called in every rejection round
        a, b, c = M[:, 0, 0], M[:, 1, 0], M[:, 1, 1]
        return 0.5 * (a + c) - np.hypot(0.5 * (a - c), b) >= threshold
    return np.linalg.eigvalsh(M).min(axis=-1) >= threshold


def project_stats(query, s_t, n):
    """PSD projection of ``s_t (C, d)`` keeping ``n`` and the sums ``B~[1:, 0]`` fixed."""
    B = _gram(query, np.atleast_2d(s_t), n)
    b = B[:, 1:, 0]
    Cm = core.psd_clip(_schur(B, float(n)), 0.0)
    B[:, 1:, 1:] = Cm + b[:, :, None] * b[:, None, :] / n
    k = B.shape[-1] - 1
    return query.pack(B[:, :k, k], B[:, k, k], B[:, :k, :k])


# ------------------------------------------------------------------------------------------
# noisy covariate moments: a release set (curator side) and its reading (analyst side)
# ------------------------------------------------------------------------------------------

def release_covariate_moments(records, query, mechanism, *, neighbours: str = "replace",
                              seed=None, metadata: dict | None = None):
    """Curator side of Gibbs-SS-Noisy: release the covariate moments of a regression table.

    A :class:`~privpost.Release` of :class:`~privpost.queries.CovariateMoments` with the bounds
    and columns of the RegressionStats ``query`` (so the moments are those of the same
    normalised covariates ``x~``).

    Parameters
    ----------
    records : (n, p+1) original-scale records ``[x_1..x_p, y]`` (as for ``query``; y is ignored)
    query : RegressionStats
    mechanism : an additive mechanism built from a privacy target (e.g. ``Laplace(epsilon=0.5)``);
        calibrated to the moment query's sensitivity under ``neighbours``.
    seed : None for a real release (cryptographic noise), int/Generator for simulations.
    """
    from privpost.queries import CovariateMoments
    from privpost.releases.release import release as _release

    if getattr(query, "name", None) != "regression_stats":
        raise IncompatibleError("release_covariate_moments takes the RegressionStats query whose "
                                "bounds define the covariates' normalisation")
    mq = CovariateMoments(query.bounds_x, columns=query.columns)
    return _release(records, query=mq, mechanism=mechanism, neighbours=neighbours, seed=seed,
                    metadata=metadata)


def release_with_moments(records, query, epsilon: float, *, split: float = 0.5,
                         neighbours: str = "replace", seed=None, description: str = ""):
    """Gibbs-SS-Noisy's two releases of one table, splitting an ε budget (seed 003 §5.2.4.4).

    Returns a :class:`~privpost.ReleaseSet` of a Laplace RegressionStats release at
    ``(1 - split) ε`` and a Laplace CovariateMoments release at ``split ε`` (the thesis splits
    evenly), in that order, both under ``neighbours``. Each is ε_i-DP with its own query's L1
    sensitivity (Laplace scale Δ_i/ε_i), and the two touch the same records, so by sequential
    composition the set is (ε_1 + ε_2)-DP. The two shares are computed so that
    ε_1 + ε_2 ≤ ε holds *exactly* (the moment share is lowered by an ulp if float rounding of
    ``(1 - split) ε`` and ``split ε`` would overshoot), so ``total_privacy()`` never exceeds ε.
    Feed it to ``infer(model, release_set, method="gibbs-ss", covariate_moments="noisy")``.
    """
    from fractions import Fraction

    from privpost._rng import spawn
    from privpost.mechanisms import Laplace
    from privpost.releases.release import ReleaseSet
    from privpost.releases.release import release as _release

    if isinstance(split, bool) or not isinstance(split, (int, float)) or not 0 < split < 1:
        raise PrivpostError(f"split must be in (0, 1), got {split!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)) or \
            not (0 < float(epsilon) < math.inf):
        raise PrivpostError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    epsilon = float(epsilon)
    eps_stats = (1.0 - split) * epsilon
    eps_moms = split * epsilon
    while Fraction(eps_stats) + Fraction(eps_moms) > Fraction(epsilon):
        eps_moms = math.nextafter(eps_moms, 0.0)
    s1, s2 = (None, None) if seed is None else spawn(seed, 2)
    rel = _release(records, query=query, mechanism=Laplace(epsilon=eps_stats),
                   neighbours=neighbours, seed=s1)
    mom = release_covariate_moments(records, query, Laplace(epsilon=eps_moms),
                                    neighbours=neighbours, seed=s2)
    return ReleaseSet([rel, mom], description=description or (
        f"regression statistics and covariate moments (Gibbs-SS-Noisy), epsilon {epsilon:g} "
        f"split {1 - split:g}/{split:g}"))


def split_release_set(release):
    """``(statistics release, covariate-moment release or None)`` from what gibbs-ss was given.

    A single :class:`~privpost.Release` is the statistics release. A
    :class:`~privpost.ReleaseSet` must hold exactly one RegressionStats release and at most one
    CovariateMoments release of the same records (same ``n``, same covariate bounds, so the
    moments are those of the normalised covariates the statistics are built from); anything
    else raises :class:`IncompatibleError`.
    """
    from privpost.releases.release import ReleaseSet

    if not isinstance(release, ReleaseSet):
        return release, None
    stats, moms = [], []
    for i, rel in enumerate(release.releases):
        kind = getattr(rel.query, "name", type(rel.query).__name__)
        if kind == "regression_stats":
            stats.append(rel)
        elif kind == "covariate_moments":
            moms.append(rel)
        else:
            raise IncompatibleError(
                f"gibbs-ss reads a release set of one RegressionStats release and one "
                f"CovariateMoments release; release [{i}] is a {kind!r} release")
    if len(stats) != 1 or len(moms) > 1:
        raise IncompatibleError(
            f"gibbs-ss reads a release set of one RegressionStats release and at most one "
            f"CovariateMoments release; this set has {len(stats)} and {len(moms)}")
    rel = stats[0]
    mom = moms[0] if moms else None
    if mom is not None:
        if mom.n != rel.n:
            raise IncompatibleError(f"the covariate-moment release has n = {mom.n}, the "
                                    f"statistics release n = {rel.n}: not the same records")
        if mom.query.bounds_x != rel.query.bounds_x:
            raise IncompatibleError(
                f"the covariate-moment release normalises the covariates with bounds_x = "
                f"{[list(b) for b in mom.query.bounds_x]}, the statistics release with "
                f"{[list(b) for b in rel.query.bounds_x]}: the moments must be those of the "
                "same normalised covariates")
    return rel, mom


# ------------------------------------------------------------------------------------------
# conjugate draws given original-scale statistics (batched over chains)
# ------------------------------------------------------------------------------------------

def _gauss_precision(rng, Lam, h, scale=None):
    """``N(Lam^{-1} h, scale^2 Lam^{-1})`` for stacked ``Lam (C,k,k)``, ``h (C,k)``."""
    L = np.linalg.cholesky(Lam)
    mean = np.linalg.solve(Lam, h[..., None])[..., 0]
    z = rng.standard_normal(h.shape)
    if scale is not None:
        z = z * scale[:, None]
    dev = np.linalg.solve(np.swapaxes(L, -1, -2), z[..., None])[..., 0]
    return mean + dev


@dataclass
class RegPrior:
    kind: str                 # "known", "conjugate", "independent"
    P0: np.ndarray            # prior precision of beta (conjugate: per unit sigma2)
    h0: np.ndarray
    c0: float
    a0: float
    b0: float
    sigma2: float | None
    niw: dict | None = None   # mu0, kappa0, nu0, Psi0
    fixed_cov: tuple | None = None   # (m, S)

    @classmethod
    def from_model(cls, model) -> "RegPrior":
        V0 = np.asarray(model.beta_cov, dtype=np.float64)
        P0 = np.linalg.inv(V0)
        P0 = 0.5 * (P0 + P0.T)
        beta0 = np.asarray(model.beta0, dtype=np.float64)
        h0 = P0 @ beta0
        if model.sigma2 is not None:
            kind = "known"
        else:
            kind = "conjugate" if model.prior == "conjugate" else "independent"
        niw = None
        fixed = None
        if getattr(model, "hyperprior", None) == "niw":
            niw = {"mu0": np.asarray(model.mu0, dtype=np.float64), "kappa0": float(model.kappa0),
                   "nu0": float(model.nu0), "Psi0": np.asarray(model.Psi0, dtype=np.float64)}
        else:
            fixed = (np.asarray(model.m, dtype=np.float64), np.asarray(model.S, dtype=np.float64))
        return cls(kind, P0, h0, float(beta0 @ h0), float(model.a0), float(model.b0),
                   None if model.sigma2 is None else float(model.sigma2), niw, fixed)


def draw_beta_sigma2(rng, prior: RegPrior, XtX, Xty, yty, n, beta_prev=None, sigma2_prev=None):
    """One conjugate (or two-block Gibbs, for the independent prior) draw of ``(beta, sigma2)``
    given original-scale statistics; batched over chains. Returns ``(beta (C,k), sigma2 (C,))``.
    """
    C = XtX.shape[0]
    if prior.kind == "known":
        s2 = np.full(C, prior.sigma2)
        Lam = prior.P0 + XtX / prior.sigma2
        beta = _gauss_precision(rng, Lam, prior.h0 + Xty / prior.sigma2)
        return beta, s2
    if prior.kind == "conjugate":
        Lam = prior.P0 + XtX
        h = prior.h0 + Xty
        mu = np.linalg.solve(Lam, h[..., None])[..., 0]
        bn = prior.b0 + 0.5 * (yty + prior.c0 - np.einsum("ci,ci->c", mu, h))
        bn = np.maximum(bn, 1e-12 * prior.b0)
        s2 = bn / rng.standard_gamma(prior.a0 + 0.5 * n, size=C)
        L = np.linalg.cholesky(Lam)
        z = rng.standard_normal((C, Lam.shape[-1])) * np.sqrt(s2)[:, None]
        beta = mu + np.linalg.solve(np.swapaxes(L, -1, -2), z[..., None])[..., 0]
        return beta, s2
    # independent prior: sigma2 | beta, then beta | sigma2
    ssr = (yty - 2.0 * np.einsum("ci,ci->c", beta_prev, Xty)
           + np.einsum("ci,cij,cj->c", beta_prev, XtX, beta_prev))
    ssr = np.maximum(ssr, 0.0)
    s2 = (prior.b0 + 0.5 * ssr) / rng.standard_gamma(prior.a0 + 0.5 * n, size=C)
    Lam = prior.P0 + XtX / s2[:, None, None]
    beta = _gauss_precision(rng, Lam, prior.h0 + Xty / s2[:, None])
    return beta, s2


def draw_niw(rng, niw: dict, XtX, n):
    """``(m, S) | x^T x`` by NIW conjugacy from the original-scale ``X^T X (C, p+1, p+1)``."""
    C = XtX.shape[0]
    p = XtX.shape[-1] - 1
    xbar = XtX[:, 0, 1:] / n
    scatter = XtX[:, 1:, 1:] - n * xbar[:, :, None] * xbar[:, None, :]
    scatter = core.psd_clip(scatter, 0.0)
    k0, nu0, mu0, Psi0 = niw["kappa0"], niw["nu0"], niw["mu0"], niw["Psi0"]
    kn, nun = k0 + n, nu0 + n
    mun = (k0 * mu0 + n * xbar) / kn
    dm = xbar - mu0
    Psin = Psi0 + scatter + (k0 * n / kn) * dm[:, :, None] * dm[:, None, :]
    S = inv_wishart(rng, Psin, nun)
    m = core.mvn_sample(rng, mun, S / kn)
    return m, S


def inv_wishart(rng, Psi, nu):
    """Batched ``InvWishart(nu, Psi)`` draws (mean ``Psi / (nu - p - 1)``) via Bartlett."""
    C, p, _ = Psi.shape
    Pinv = np.linalg.inv(Psi)
    L = np.linalg.cholesky(0.5 * (Pinv + np.swapaxes(Pinv, -1, -2)))
    A = np.zeros((C, p, p))
    A[:, np.arange(p), np.arange(p)] = np.sqrt(rng.chisquare(nu - np.arange(p), size=(C, p)))
    il = np.tril_indices(p, -1)
    A[:, il[0], il[1]] = rng.standard_normal((C, il[0].size))
    LA = L @ A
    W = LA @ np.swapaxes(LA, -1, -2)
    S = np.linalg.inv(W)
    return 0.5 * (S + np.swapaxes(S, -1, -2))


# ------------------------------------------------------------------------------------------
# the sampler
# ------------------------------------------------------------------------------------------

@dataclass
class RegProblem:
    query: object
    n: int
    p: int
    z: np.ndarray
    pairs: np.ndarray
    scaling: Scaling
    prior: RegPrior
    mode: str
    noise: NoiseModel
    M4x_fixed: np.ndarray | None
    max_tries: int
    notes: list = field(default_factory=list)


def project_moments(exponents, values, p: int, iters: int = 500, floor: float = 1e-10):
    """Make noisy moments ``E[x^a]`` (``1 <= |a| <= 4``) a valid-looking moment sequence.

    The moment matrix ``H[i, j] = E[x^{a_i + a_j}]`` over the monomials ``a_i`` of degree
    ``<= 2`` (constant included) is positive semi-definite for every distribution; noisy moments
    break this (e.g. a negative ``E[x^2]``). Alternating projections between the PSD cone
    (eigenvalues clipped at ``floor``) and the matrices with this Hankel-like structure and
    ``H[0, 0] = 1`` (entries sharing an exponent averaged) give a structured matrix, from which
    the projected moments are read. Post-processing of the release: no privacy cost.
    Returns the projected values, same order as ``exponents``.
    """
    basis = [np.zeros(p, dtype=np.int64)] + [a for a in exponents if a.sum() <= 2]
    r = len(basis)
    key = {}
    groups = np.empty((r, r), dtype=np.int64)
    for i in range(r):
        for j in range(r):
            s = tuple(int(v) for v in basis[i] + basis[j])
            groups[i, j] = key.setdefault(s, len(key))
    table = {tuple(int(v) for v in a): float(x) for a, x in zip(exponents, values)}
    table[(0,) * p] = 1.0
    vals = np.array([table[s] for s in key])
    const = key[(0,) * p]
    counts = np.bincount(groups.ravel(), minlength=len(key)).astype(np.float64)
    H = vals[groups]
    for _ in range(iters):
        w, U = np.linalg.eigh(H)
        if w.min() >= floor:
            break
        P = (U * np.maximum(w, floor)) @ U.T
        vals = np.bincount(groups.ravel(), weights=P.ravel(), minlength=len(key)) / counts
        vals[const] = 1.0
        H = vals[groups]
    out = dict(zip(key, vals))
    return np.array([out.get(tuple(int(v) for v in a), table[tuple(int(v) for v in a)])
                     for a in exponents])


def _privacy_text(priv) -> str:
    if priv.kind == "pure":
        return f"{priv.epsilon:g}-DP"
    if priv.kind == "zcdp":
        return f"{priv.rho:g}-zCDP"
    return f"({priv.epsilon:g}, {priv.delta:g})-DP"


def moments_from_release(mom, p: int) -> np.ndarray:
    """``E[(1, x~)^{⊗4}]`` (shape ``(1, p+1, p+1, p+1, p+1)``) from a CovariateMoments release:
    the noisy sums divided by ``n`` and projected to a valid moment sequence
    (:func:`project_moments`; post-processing, no privacy cost)."""
    expo = np.asarray(mom.query.exponents, dtype=np.int64)
    if expo.shape[1] != p or expo.sum(axis=1).max() < 4:
        raise IncompatibleError("the covariate-moment release must cover every covariate moment "
                                f"up to order 4 of the p = {p} covariates")
    vals = project_moments(expo, np.asarray(mom.observed, dtype=np.float64) / mom.n, p)
    return moment_tensor_from_monomials(expo, vals, p)[None]


def build_problem(model, release, covariate_moments=None, max_tries=10):
    """Check ``(model, release)`` and precompute what the sampler needs.

    ``release``: a RegressionStats :class:`~privpost.Release`, or a :class:`~privpost.ReleaseSet`
    of one plus a CovariateMoments release of the same records (:func:`split_release_set`),
    which ``covariate_moments="noisy"`` (the default for such a set) needs.
    """
    given = release
    release, mom = split_release_set(release)
    query = release.query
    if isinstance(max_tries, bool) or not isinstance(max_tries, (int, np.integer)) \
            or max_tries < 1:
        raise PrivpostError(f"max_tries must be an integer >= 1, got {max_tries!r}")
    if getattr(query, "name", None) != "regression_stats":
        raise IncompatibleError("gibbs-ss fits LinearRegression to a RegressionStats release, not "
                                f"{getattr(query, 'name', type(query).__name__)!r}")
    p = int(query.p)
    if p != int(model.p):
        raise IncompatibleError(f"the release has p = {p} covariates, the model p = {model.p}")
    n = int(release.n)
    prior = RegPrior.from_model(model)
    niw = prior.niw is not None
    mode = covariate_moments or ("update" if niw else "noisy" if mom is not None else "prior")
    if mode not in ("prior", "update", "noisy"):
        raise PrivpostError(f"covariate_moments must be 'prior', 'update' or 'noisy', got {mode!r}")
    if niw and mode != "update":
        raise IncompatibleError(
            "this LinearRegression has a NIW hyperprior on the covariate law (parameters m, S), "
            "which gibbs-ss infers with covariate_moments='update'; for 'prior' or 'noisy' use a "
            "model with a fixed covariate law (m=, S=)")
    law = getattr(model, "_cov", None)
    if mode == "prior" and law is not None and not law.all_normal:
        raise IncompatibleError(
            f"covariates: gibbs-ss with covariate_moments='prior' uses the Isserlis moments of a "
            f"normal covariate law; this model declares {law.describe()}. Use damcmc (exact, "
            "any covariate law) or a ReleaseSet with a CovariateMoments release "
            "(covariate_moments='noisy': released moments, any law)")
    if not niw and mode == "update":
        raise IncompatibleError("covariate_moments='update' needs a model with "
                                "hyperprior='niw' (the covariate law is fixed in this model)")
    if mode == "noisy" and mom is None:
        raise IncompatibleError(
            "covariate_moments='noisy' needs the covariates' moments as a release: pass a "
            "ReleaseSet holding this RegressionStats release and a CovariateMoments release of "
            "the same records (release_with_moments(records, query, epsilon) makes both)")
    _check_plausible(release, n)
    sc = Scaling.from_query(query)
    notes = []
    M4x = None
    if mode == "prior":
        m, S = prior.fixed_cov
        mt = ((m - sc.cx) / sc.hx)[None]
        St = (S / np.outer(sc.hx, sc.hx))[None]
        M4x = gaussian_moment_tensor(mt, St)
        notes.append("covariate moments: the model's fixed covariate law N(m, S) "
                     "(Gibbs-SS-Prior)")
    elif mode == "update":
        notes.append("covariate moments: N(m, S) with (m, S) updated in the sampler by NIW "
                     "conjugacy from the latent x'x block (Gibbs-SS-Update)")
    else:
        mnoise = noise_model(mom)
        M4x = moments_from_release(mom, p)
        notes.append(
            "covariate moments: the CovariateMoments release (Gibbs-SS-Noisy): the noisy sums "
            "of the normalised covariates' monomials up to order 4, divided by n and projected "
            "to a valid moment sequence, are used as the covariates' population moments")
        notes.append(model.covariate_note(
            unused_by="gibbs-ss with covariate_moments='noisy' (the covariates' moments come "
                      "from the CovariateMoments release)"))
        notes.append(
            "the moment release's noise is NOT modelled, as in the thesis (seed 003 §5.2.4.4: "
            "'we do not perform inference over the noisy sample moments'), nor the sampling "
            f"variability of sample moments around population moments ({mnoise.kind} noise of "
            f"scale {mnoise.scale:.4g} on the sums, {mnoise.scale / n:.3g} on the moments): "
            "expect slight overconfidence when it is not small (thesis §5.3.2)")
        total = given.total_privacy()
        notes.append(f"privacy: statistics release {_privacy_text(release.privacy)}, moment "
                     f"release {_privacy_text(mom.privacy)}; together "
                     f"{_privacy_text(total)} ({release.neighbours} neighbours)")
    if mom is not None and mode != "noisy":
        notes.append(f"the release set's CovariateMoments release is not used "
                     f"(covariate_moments={mode!r})")
    return RegProblem(query, n, p, np.asarray(release.observed, dtype=np.float64), stat_pairs(p),
                      sc, prior, mode, noise_model(release), M4x, int(max_tries), notes)


def _check_plausible(release, n: int, tail: float = 40.0) -> None:
    """Refuse a release the CLT sampler cannot represent: every normalised statistic lies in
    ``[-n, n]`` (each record's entries are in ``[-1, 1]``), and additive noise exceeds ``tail``
    noise scales with probability below ``e^-40`` (Laplace; far less for Gaussian noise). An
    observed value beyond ``n + tail * scale`` is therefore inconsistent with the document's own
    mechanism; in double precision it made the latent Gram matrix singular (``LinAlgError``)."""
    scale = getattr(release.mechanism, "scale", None)
    if scale is None:
        return
    y = np.asarray(release.observed, dtype=np.float64)
    far = np.flatnonzero(np.abs(y) > n + tail * float(scale))
    if far.size:
        j = int(far[0])
        raise IncompatibleError(
            f"observed[{j}] = {y[j]:.6g} is more than {tail:g} noise scales ({scale:.4g}) "
            f"outside [-n, n] = [-{n}, {n}], the range of the normalised regression statistic: "
            "the release is inconsistent with its stated mechanism (probability below e^-40), "
            "and gibbs-ss's CLT cannot represent it; check the document")


@dataclass
class RegState:
    beta: np.ndarray
    sigma2: np.ndarray
    m: np.ndarray | None
    S: np.ndarray | None
    s: np.ndarray
    omega: np.ndarray
    projected: np.ndarray
    accept: np.ndarray | None = None


def init_state(rng, prob: RegProblem, model, chains: int) -> RegState:
    draws = [model.prior_sample(rng) for _ in range(chains)]
    beta = np.array([d["beta"] for d in draws], dtype=np.float64)
    sigma2 = (np.array([d["sigma2"] for d in draws], dtype=np.float64) if prob.prior.sigma2 is None
              else np.full(chains, prob.prior.sigma2))
    m = S = None
    if prob.mode == "update":
        m = np.array([d["m"] for d in draws], dtype=np.float64)
        S = np.array([d["S"] for d in draws], dtype=np.float64)
    d = prob.z.shape[0]
    s = project_stats(prob.query, np.broadcast_to(prob.z, (chains, d)).copy(), prob.n)
    if prob.noise.kind == "laplace":
        omega = core.laplace_mixture_prior(rng, prob.noise.scale, (chains, d))
    else:
        omega = np.full((chains, d), prob.noise.scale ** 2)
    # start from the plug-in (naive) conditional given the projected noisy statistic rather than
    # from the prior: with large n a prior draw far from the data can take thousands of
    # iterations to come back (the Laplace mixture explains the gap by a huge noise variance)
    XtX, Xty, yty = original_stats(prob.query, s, prob.n, prob.scaling)
    XtX = 0.5 * (XtX + np.swapaxes(XtX, -1, -2))
    beta, sigma2 = draw_beta_sigma2(rng, prob.prior, XtX, Xty, yty, prob.n, beta, sigma2)
    if prob.mode == "update":
        m, S = draw_niw(rng, prob.prior.niw, XtX, prob.n)
    return RegState(beta, sigma2, m, S, s, omega, np.zeros(chains, dtype=bool))


def _moment_tensor(prob: RegProblem, state: RegState):
    sc = prob.scaling
    if prob.mode == "update":
        mt = (state.m - sc.cx) / sc.hx
        St = state.S / np.outer(sc.hx, sc.hx)
        return gaussian_moment_tensor(mt, St)
    return prob.M4x_fixed


def clt(prob: RegProblem, state: RegState, beta=None, sigma2=None, M4x=None):
    """CLT mean ``n mu_t (C, d)`` and covariance ``n Sigma_t (C, d, d)`` (PSD-projected) at the
    state's parameters (or at ``beta, sigma2`` when given)."""
    if M4x is None:
        M4x = _moment_tensor(prob, state)
    beta = state.beta if beta is None else beta
    sigma2 = state.sigma2 if sigma2 is None else sigma2
    bt, s2t = normalised_params(beta, sigma2, prob.scaling)
    mu, Sig = stat_moments(M4x, bt, s2t, prob.pairs)
    return prob.n * mu, prob.n * core.psd_clip(Sig, 0.0)


# ------------------------------------------------------------------------------------------
# collapsed Metropolis step for (beta, sigma2)
# ------------------------------------------------------------------------------------------

def log_prior(prior: RegPrior, beta, sigma2):
    """Log prior density of ``(beta, sigma2)`` up to a constant (batched)."""
    d = beta - np.linalg.solve(prior.P0, prior.h0)
    quad = np.einsum("ci,ij,cj->c", d, prior.P0, d)
    if prior.kind == "known":
        return -0.5 * quad
    k = beta.shape[-1]
    lig = -(prior.a0 + 1.0) * np.log(sigma2) - prior.b0 / sigma2
    if prior.kind == "conjugate":
        return -0.5 * quad / sigma2 - 0.5 * k * np.log(sigma2) + lig
    return -0.5 * quad + lig


def collapsed_log_target(prob: RegProblem, state: RegState, beta, sigma2, M4x=None):
    """``log p(beta, log sigma2 | z, omega[, m, S])`` up to a constant under the CLT with the
    latent statistic integrated out: ``p(beta, sigma2) sigma2 N(z; n mu_t, n Sigma_t +
    diag omega)`` (``sigma2`` is the Jacobian of ``log sigma2``)."""
    m, V = clt(prob, state, beta, sigma2, M4x)
    S = V + state.omega[:, :, None] * np.eye(V.shape[-1])
    r = prob.z[None, :] - m
    sign, logdet = np.linalg.slogdet(S)
    quad = np.einsum("ci,ci->c", r, np.linalg.solve(S, r[..., None])[..., 0])
    out = log_prior(prob.prior, beta, sigma2) - 0.5 * (logdet + quad)
    if prob.prior.kind != "known":
        out = out + np.log(sigma2)
    return np.where((sign > 0) & np.isfinite(out), out, -np.inf)


class Adaptation:
    """Proposal of the collapsed step: a shared covariance (pooled warm-up draws of
    ``phi = (beta, log sigma2)``, scaled by ``2.38^2 / dim``; Haario et al. 2001) times a
    per-chain scale tuned towards acceptance 0.234 (Robbins-Monro). Frozen after warm-up."""

    def __init__(self, dim, chains, cov0):
        self.dim = dim
        self.L = np.linalg.cholesky(cov0 + 1e-300 * np.eye(dim))
        self.log_step = np.zeros(chains)
        self.sum = np.zeros(dim)
        self.sum2 = np.zeros((dim, dim))
        self.count = 0

    def propose(self, rng, phi):
        z = rng.standard_normal(phi.shape)
        return phi + np.exp(self.log_step)[:, None] * (z @ self.L.T)

    def learn(self, it, phi, acc):
        self.log_step += (acc - 0.234) / math.sqrt(it + 1.0)
        self.sum += phi.sum(0)
        self.sum2 += phi.T @ phi
        self.count += phi.shape[0]
        if self.count >= 50 * self.dim and it % 50 == 0:
            mean = self.sum / self.count
            cov = self.sum2 / self.count - np.outer(mean, mean)
            cov = 0.5 * (cov + cov.T) * (2.38 ** 2 / self.dim)
            cov += 1e-10 * np.trace(cov) / self.dim * np.eye(self.dim) + 1e-300 * np.eye(self.dim)
            try:
                self.L = np.linalg.cholesky(cov)
                self.log_step[:] = np.mean(self.log_step)
            except np.linalg.LinAlgError:
                pass


def _phi(prob, beta, sigma2):
    return beta if prob.prior.kind == "known" else np.column_stack([beta, np.log(sigma2)])


def _unphi(prob, phi, chains):
    if prob.prior.kind == "known":
        return phi, np.full(chains, prob.prior.sigma2)
    return phi[:, :-1], np.exp(phi[:, -1])


def collapsed_step(rng, prob: RegProblem, state: RegState, adapt: Adaptation, learn: bool,
                   it: int):
    """Random-walk Metropolis on ``(beta, log sigma2)`` targeting
    :func:`collapsed_log_target` (the covariate law held fixed).

    Returns ``(beta (C, k), sigma2 (C,), accepted (C,), M4x)``; ``M4x`` is the covariate moment
    tensor of the (unchanged) covariate law, for reuse by the rest of the iteration."""
    C = state.beta.shape[0]
    M4x = _moment_tensor(prob, state)
    phi = _phi(prob, state.beta, state.sigma2)
    cur = collapsed_log_target(prob, state, state.beta, state.sigma2, M4x)
    prop = adapt.propose(rng, phi)
    pb, ps = _unphi(prob, prop, C)
    new = collapsed_log_target(prob, state, pb, ps, M4x)
    acc = np.log(rng.random(C)) < new - cur
    beta = np.where(acc[:, None], pb, state.beta)
    sigma2 = np.where(acc, ps, state.sigma2)
    if learn:
        adapt.learn(it, _phi(prob, beta, sigma2), acc.astype(float))
    return beta, sigma2, acc, M4x


def initial_adaptation(prob: RegProblem, state: RegState) -> Adaptation:
    """Starting proposal: the conditional covariance of ``beta`` given the (projected) noisy
    statistic, inflated 4x, and variance ``2/n`` for ``log sigma2``."""
    C = state.beta.shape[0]
    XtX, _, _ = original_stats(prob.query, state.s[:1], prob.n, prob.scaling)
    s2 = float(np.median(state.sigma2))
    Lam = prob.prior.P0 / (1.0 if prob.prior.kind == "conjugate" else 1.0) + XtX[0] / s2
    cov_b = 4.0 * np.linalg.inv(0.5 * (Lam + Lam.T))
    k = cov_b.shape[0]
    if prob.prior.kind == "known":
        cov = cov_b
    else:
        cov = np.zeros((k + 1, k + 1))
        cov[:k, :k] = cov_b
        cov[k, k] = 4.0 * 2.0 / prob.n
    cov = cov * (2.38 ** 2 / cov.shape[0])
    return Adaptation(cov.shape[0], C, cov)


def gibbs_step(rng, prob: RegProblem, state: RegState, adapt: Adaptation | None = None,
               learn: bool = False, it: int = 0) -> RegState:
    """One iteration: [collapsed Metropolis step for (beta, sigma2)], s | theta, omega, z (PSD),
    omega | s, (beta, sigma2) | s (conjugate), [(m, S) | x'x (NIW)]."""
    C, d = state.s.shape
    acc = None
    M4x = None
    if adapt is not None:
        beta0, s20, acc, M4x = collapsed_step(rng, prob, state, adapt, learn, it)
        state = RegState(beta0, s20, state.m, state.S, state.s, state.omega, state.projected)
    m, V = clt(prob, state, M4x=M4x)
    mean, cov = core.condition_linear_gaussian(m, V, np.eye(d), np.zeros(d), prob.z, state.omega)
    s = state.s.copy()
    done = np.zeros(C, dtype=bool)
    last = None
    factors = core.MvnFactors(cov)          # factorised once, reused by every rejection round
    for _ in range(prob.max_tries):
        idx = np.flatnonzero(~done)
        if idx.size == 0:
            break
        draw = factors.sample(rng, mean[idx], idx)
        ok = (np.all(np.abs(draw) <= prob.n, axis=-1)
              & is_psd_stat(prob.query, draw, prob.n, tol=0.0))
        s[idx[ok]] = draw[ok]
        done[idx[ok]] = True
        if last is None:
            last = np.empty_like(s)
        last[idx] = draw
    projected = ~done
    if projected.any():
        idx = np.flatnonzero(projected)
        s[idx] = project_stats(prob.query, last[idx], prob.n)
    if prob.noise.kind == "laplace":
        omega = core.laplace_mixture_variances(rng, prob.z[None, :] - s, prob.noise.scale)
    else:
        omega = state.omega
    XtX, Xty, yty = original_stats(prob.query, s, prob.n, prob.scaling)
    XtX = 0.5 * (XtX + np.swapaxes(XtX, -1, -2))
    beta, sigma2 = draw_beta_sigma2(rng, prob.prior, XtX, Xty, yty, prob.n, state.beta,
                                    state.sigma2)
    m_x, S_x = state.m, state.S
    if prob.mode == "update":
        m_x, S_x = draw_niw(rng, prob.prior.niw, XtX, prob.n)
    out = RegState(beta, sigma2, m_x, S_x, s, omega, projected)
    out.accept = acc
    return out


def run(model, release, *, draws, warmup, chains, seed=None, progress=False,
        covariate_moments=None, max_tries=10, collapsed=True, **options):
    """gibbs-ss for LinearRegression on a RegressionStats release, or on a ReleaseSet of one
    and a CovariateMoments release (``covariate_moments="noisy"``; see the module docstring).

    ``collapsed=False`` runs the thesis's Algorithm 7 alone (no collapsed Metropolis step).
    """
    if "moments" in options:
        raise PrivpostError("the moments= option is gone: give gibbs-ss a ReleaseSet holding the "
                            "RegressionStats release and a CovariateMoments release "
                            "(release_with_moments returns one) with covariate_moments='noisy'")
    reject_unknown("gibbs-ss", options)
    prob = build_problem(model, release, covariate_moments, max_tries)
    rng = as_generator(seed)
    state = init_state(rng, prob, model, chains)
    k = prob.p + 1
    d = prob.z.shape[0]
    out = {"beta": np.empty((chains, draws, k))}
    if "sigma2" in model.param_shapes:
        out["sigma2"] = np.empty((chains, draws))
    if prob.mode == "update":
        out["m"] = np.empty((chains, draws, prob.p))
        out["S"] = np.empty((chains, draws, prob.p, prob.p))
    stat = np.empty((chains, draws, d))
    proj = np.zeros((chains, draws), dtype=bool)
    acc_out = np.zeros((chains, draws))
    adapt = initial_adaptation(prob, state) if collapsed else None
    bar = Progress(warmup + draws, progress, "gibbs-ss")
    for it in range(warmup + draws):
        try:
            state = gibbs_step(rng, prob, state, adapt, learn=it < warmup, it=it)
        except np.linalg.LinAlgError as exc:
            raise IncompatibleError(
                f"gibbs-ss: the sampled regression statistics became numerically singular at "
                f"iteration {it} ({exc}); the CLT approximation breaks down for this release "
                "(tiny n or extreme observed values) -- use method='damcmc'") from None
        j = it - warmup
        if j >= 0:
            out["beta"][:, j] = state.beta
            if "sigma2" in out:
                out["sigma2"][:, j] = state.sigma2
            if "m" in out:
                out["m"][:, j] = state.m
                out["S"][:, j] = state.S
            stat[:, j] = state.s
            proj[:, j] = state.projected
            if state.accept is not None:
                acc_out[:, j] = state.accept
        bar.update(it)
    notes = [
        "gibbs-ss is approximate: the normalised sufficient statistics are given their CLT "
        "normal law (Bernstein & Sheldon 2019)",
        "clamping is ignored by the CLT model, as in the thesis: the [-1, 1] normalisation is "
        "treated as an affine map of the original-scale statistics, so records outside the "
        "query's bounds make the model misspecified (damcmc models clamping exactly); draws with "
        "an entry outside [-n, n] are rejected first",
    ]
    if prob.noise.kind == "laplace":
        notes.append("Laplace noise handled by its normal scale mixture (inverse-Gaussian "
                     "updates of the latent variances)")
    else:
        notes.append("Gaussian noise conditioned on directly")
    if prob.noise.approximate:
        notes.append(prob.noise.approximate)
    notes.extend(prob.notes)
    if collapsed:
        notes.append("each iteration starts with an adaptive random-walk Metropolis step for "
                     "(beta, log sigma2) under the CLT with the latent statistic integrated out "
                     "(the thesis's Gibbs steps alone crawl when the privacy noise dominates the "
                     "sampling variability); its proposal is frozen after warm-up, mean "
                     f"acceptance {acc_out.mean():.2f}")
    nproj = int(proj.sum())
    notes.append(f"PSD projection of the sampled statistics (Schur-complement eigenvalue "
                 f"clipping after {prob.max_tries} rejected draws) applied in {nproj} of "
                 f"{proj.size} retained iterations")
    stats = {"stat": stat, "projected": proj}
    if collapsed:
        stats["accept_collapsed"] = acc_out
    return make_posterior(out, stats, "gibbs-ss", model, release, notes, exact=False)
