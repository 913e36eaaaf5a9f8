"""Penalty MCMC as a curator-side private sampler (Yıldırım 2016, seed 001).

The curator runs random-walk Metropolis-Hastings on the confidential records; every acceptance
decision sees the log-likelihood ratio ``d_n(θ, θ') = Σ_i ℓ(y_i, θ') - ℓ(y_i, θ)`` only through
a Gaussian mechanism, and the penalty ``σ²/2`` (Ceperley & Dewing 1999) keeps the chain exactly
invariant for the **non-private** posterior ``p(θ | y)``. The published transcript (the paper's
"adversary's view": states θ_t, proposals θ'_t and the noisy ratios) is a k-fold adaptive
composition of Gaussian mechanisms; its guarantee comes from :mod:`privpost._gaussian_composition`.

Algorithms (extract 001 §2)
---------------------------
* Algorithm 1 (one owner, constant σ²): release ``d̂ = d_n + σ Z``; accept iff
  ``log U < log η(θ') - log η(θ) + d̂ - σ²/2`` (symmetric proposal: the q-ratio cancels).
* Algorithm 2 (N owners): owner i releases ``d̂_i = d_{n_i} + σ Z_i`` (independent, local
  noise); accept with ``Σ_i d̂_i - N σ²/2``. Each owner's records are touched only by its own
  mechanism, so each owner has the single-owner guarantee (with the total n in the step size).
* Algorithm 3 (exponential families, ``variant="expfam"``): release a fresh
  ``Ŝ_t ~ N(S_n, ξ I)`` per iteration; ``d̂ = n[log g(θ') - log g(θ)] + (φ(θ') - φ(θ))·Ŝ_t`` has
  variance ``σ²(θ, θ') = ||φ(θ') - φ(θ)||² ξ`` (pair-dependent, symmetric) and the penalty is
  ``σ²(θ, θ')/2``. Cost per iteration is free of n. With N owners each releases its own
  ``Ŝ_i`` and the variance is ``N ||Δφ||² ξ``.

Exactness: ``d̂ ~ N(λ, v)`` with known symmetric ``v`` gives
``E[min(1, exp(d̂ - v/2 + rest))] = α_σ`` with ``α_σ(θ,θ') = α_σ(θ',θ) e^{λ(θ,θ')}``-balance
(Ceperley & Dewing; Nicholls, Fox & Watt 2012), so the chain is reversible for ``p(θ | y)``;
``α_σ <= α_MH`` (Peskun) and it has the closed form :func:`penalty_acceptance`.
The clipping variant (``clip=r``, for models without a proved bound) clips each record's ratio
to ``±r ||θ' - θ||_2``; the chain then targets a slightly different law (stated in the notes).

Sensitivity (a proved number)
-----------------------------
Proposals are a uniform box random walk ``θ' = θ + U``, ``U_i ~ U(-h, h)``, ``h = c n^{-α}``
(A3; c = ``step``, α = ``step_exponent``, default 0.5; ``n`` is public). The model's
``ratio_sensitivity(h)`` bounds the change of ``d_n`` when one record is replaced
(:mod:`privpost.models.penalty_models`; generic ``2 d M h`` from A2). Clipping: each record's
clipped ratio lies in ``[-r||Δθ||, r||Δθ||]`` and ``||Δθ||_2 <= sqrt(d) h``, so ``Δ = 2 r sqrt(d) h``.
Algorithm 3: ``Ŝ`` is a Gaussian mechanism on ``S_n`` with sensitivity ``Δ_S`` (the model's)
and sd ``sqrt(ξ)``; the proposal does not enter its privacy.

Two noise sds, one meaning each (issue #23):

* ``release_sd`` (σ; Algorithm 3: sqrt ξ) -- the sd of the Gaussian noise on **each released
  number**: an owner's noisy partial ratio ``d̂_i`` (general) or one coordinate of an owner's
  noisy statistic ``Ŝ_i`` (expfam). The privacy is computed from it and the sensitivity.
* ``ratio_sd`` (``noise_sd`` in :func:`penalty_mcmc` and ``--noise-sd``) -- the sd of the noise
  on the **log acceptance ratio** that the chain uses, summed over the N owners:
  ``sqrt(N) σ`` (general) or ``sqrt(N) ||φ(θ₀ + h 1) - φ(θ₀)|| sqrt(ξ)`` for the largest box
  move (expfam; exact for a linear φ, θ₀ the model's start). :func:`_ratio_scale` is the factor.

Budget: ``iterations=k`` given -> σ (or sqrt ξ) calibrated by
:func:`~privpost.accounting.calibrate_gaussian_sigma`; otherwise the ratio's noise sd is
``noise_sd`` (default 2.4, near the maximiser of ``s² α_σ(0, s)``, the squared jump per unit of
privacy) and k is the largest the accountant allows
(:func:`~privpost.accounting.max_gaussian_compositions`), capped at ``max_iterations``. A
``noise_sd`` the user gives is always honoured: when the budget allows more than
``max_iterations`` at it, the chain runs ``max_iterations`` at that noise and spends less than the
budget (the notes say how much). Only the *default* 2.4 is lowered, so that ``max_iterations``
spend the whole budget -- and the notes say so.

Floating point: the noise is NumPy's (PCG64) Gaussian, not hardened against floating-point
side channels (Mironov 2012), and the sensitivity is proved for exact arithmetic (the computed
sum of n per-record ratios carries a rounding error of order n·1e-16·max|ℓ|) -- stated
limitations, as for OPS. Proposals stay inside the box after rounding (see ``_INNER``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtr

from privpost._rng import as_generator
from privpost.errors import DataError, PrivpostError, ReleaseError
from privpost.models.penalty_models import PENALTY_MODELS, PenaltyModel, penalty_model

__all__ = ["penalty_mcmc", "run", "PenaltyResult", "PenaltyRelease", "penalty_acceptance",
           "penalty_kappa", "penalty_kappa_paper", "run_chain", "SCHEMA", "VARIANTS"]

SCHEMA = "privpost.penalty-release/1"
VARIANTS = ("general", "expfam")
DEFAULT_NOISE_SD = 2.4
#: proposals are drawn in a box of half-width h (1 - 1e-9), so that the float difference
#: |θ' - θ| stays <= h after rounding (|θ| < 1e6 h); the transcript check allows h (1 + 1e-9)
_INNER = 1.0 - 1e-9
#: bound on the transcript's size (numbers stored), so no call allocates without limit
MAX_TRANSCRIPT_VALUES = 50_000_000


# ------------------------------------------------------------------------------ closed forms

def penalty_acceptance(lam, s):
    """Expected penalty acceptance ``α_σ = Φ(λ/s - s/2) + e^λ Φ(-λ/s - s/2)`` (s = noise sd > 0;
    extract 001 §2.2), computed in the log domain. Arrays broadcast."""
    lam = np.asarray(lam, dtype=float)
    s = np.asarray(s, dtype=float)
    with np.errstate(over="ignore"):
        out = ndtr(lam / s - s / 2) + np.exp(lam + log_ndtr(-lam / s - s / 2))
    return np.minimum(out, 1.0)


def penalty_kappa(B):
    """Correct uniform-ergodicity constant ``κ = 1 - Φ(sqrt(B)/2)`` with ``α_σ >= κ α``
    (extract 001 §2.8: the paper's ``1 - Φ(B/2)`` is valid only for ``B >= 1``)."""
    return float(ndtr(-math.sqrt(B) / 2))


def penalty_kappa_paper(B):
    """The paper's κ = 1 - Φ(B/2) (kept to show the erratum; too large for B < 1)."""
    return float(ndtr(-B / 2))


# ------------------------------------------------------------------------------ chains

def _owner_index(owners, n):
    """``(index (n,), sizes (N,))`` from None, an int N (contiguous blocks) or labels (n,)."""
    if owners is None:
        return np.zeros(n, dtype=np.int64), [n]
    if isinstance(owners, (int, np.integer)) and not isinstance(owners, bool):
        N = int(owners)
        if not 1 <= N <= n:
            raise PrivpostError(f"owners must be between 1 and n = {n}, got {owners}")
        idx = np.repeat(np.arange(N), np.diff(np.linspace(0, n, N + 1).round().astype(int)))
        return idx, np.bincount(idx, minlength=N).tolist()
    labels = np.asarray(owners)
    if labels.shape != (n,):
        raise PrivpostError(f"owners must be an integer N or one label per record (shape ({n},)), "
                            f"got shape {labels.shape}")
    _, idx = np.unique(labels, return_inverse=True)
    return idx.astype(np.int64), np.bincount(idx).tolist()


def _release_step(r, u, prop, sigma, rng, owner_idx, N, clip=None):
    """The only data access of one iteration (Algorithm 1/2 mechanism): per-record ratios
    ``r (n,)`` -> the owners' noisy partial sums ``d̂ (N,) = d_{n_i} + sigma Z_i`` (clipped to
    ``±clip·|prop - u|`` per record first when ``clip`` is set)."""
    if clip is not None:
        b = clip * math.sqrt(float(np.sum((prop - u) ** 2)))
        r = np.clip(r, -b, b)
    return np.bincount(owner_idx, weights=r, minlength=N) + sigma * rng.standard_normal(N)


def _alg1(model, x, u0, h, sigma, k, rng, clip, penalty_factor=1.0):
    """Algorithm 1 exactly as the paper's pseudo-code (one owner, constant σ²; the penalty is
    ``penalty_factor · σ²/2``, 1 except in tests of a wrong variant)."""
    d = u0.size
    hb = h * _INNER
    states = np.empty((k + 1, d))
    props = np.empty((k, d))
    released = np.empty((k, 1))
    u = u0.copy()
    states[0] = u
    ll = model.loglik(u, x)
    for t in range(k):
        prop = u + rng.uniform(-hb, hb, d)
        llp = model.loglik(prop, x)
        r = llp - ll
        if clip is not None:
            b = clip * math.sqrt(float(np.sum((prop - u) ** 2)))
            r = np.clip(r, -b, b)
        dhat = float(r.sum()) + sigma * rng.standard_normal()
        a = model.log_prior(prop) - model.log_prior(u) + dhat - penalty_factor * sigma ** 2 / 2
        if math.log(rng.random()) < a:
            u, ll = prop, llp
        states[t + 1] = u
        props[t] = prop
        released[t, 0] = dhat
    return states, props, released


def _alg2(model, x, u0, h, sigma, k, rng, clip, owner_idx, N, penalty="variance",
          progress=None):
    """Algorithm 2 (N owners; penalty ``N σ²/2``). ``penalty="std"`` is the WRONG penalty
    ``N σ/2`` (tests only: it must fail the exactness test)."""
    d = u0.size
    hb = h * _INNER
    states = np.empty((k + 1, d))
    props = np.empty((k, d))
    released = np.empty((k, N))
    u = u0.copy()
    states[0] = u
    ll = model.loglik(u, x)
    lp = model.log_prior(u)
    pen = N * sigma ** 2 / 2 if penalty == "variance" else N * sigma / 2
    for t in range(k):
        prop = u + rng.uniform(-hb, hb, d)
        llp = model.loglik(prop, x)
        dhat = _release_step(llp - ll, u, prop, sigma, rng, owner_idx, N, clip)
        lpp = model.log_prior(prop)
        if math.log(rng.random()) < lpp - lp + float(dhat.sum()) - pen:
            u, ll, lp = prop, llp, lpp
        states[t + 1] = u
        props[t] = prop
        released[t] = dhat
        if progress is not None:
            progress.update(t)
    return states, props, released


def _alg3(model, x, u0, h, xi_sd, k, rng, owner_idx, N, progress=None):
    """Algorithm 3 (exponential families): a fresh ``Ŝ ~ N(S_n, ξ I)`` per iteration (per owner)."""
    phi, log_g, stat, _ = model.expfam()
    s_all = stat(x)
    dphi_dim = s_all.shape[1]
    S = np.zeros((N, dphi_dim))
    np.add.at(S, owner_idx, s_all)
    n = x.shape[0]
    d = u0.size
    hb = h * _INNER
    states = np.empty((k + 1, d))
    props = np.empty((k, d))
    released = np.empty((k, N * dphi_dim))
    u = u0.copy()
    states[0] = u
    lp, lg, ph = model.log_prior(u), log_g(u), phi(u)
    for t in range(k):
        prop = u + rng.uniform(-hb, hb, d)
        S_hat = S + xi_sd * rng.standard_normal((N, dphi_dim))
        php, lgp = phi(prop), log_g(prop)
        dphi = php - ph
        v = N * float(dphi @ dphi) * xi_sd ** 2
        dhat = n * (lgp - lg) + float(dphi @ S_hat.sum(axis=0))
        lpp = model.log_prior(prop)
        if math.log(rng.random()) < lpp - lp + dhat - v / 2:
            u, lp, lg, ph = prop, lpp, lgp, php
        states[t + 1] = u
        props[t] = prop
        released[t] = S_hat.ravel()
        if progress is not None:
            progress.update(t)
    return states, props, released


def run_chain(model, records, *, h, sigma, k, seed=None, owners=None, variant="general",
              clip=None, theta0=None, penalty="variance"):
    """Low-level chain (no accounting): returns ``(states (k+1, d), proposals (k, d),
    released (k, m))`` on the unconstrained scale. Used by tests and studies."""
    model = penalty_model(model)
    x = model.validate_records(records)
    idx, sizes = _owner_index(owners, x.shape[0])
    u0 = model.initial() if theta0 is None else np.asarray(theta0, dtype=float).reshape(-1)
    rng = as_generator(seed)
    if variant == "expfam":
        return _alg3(model, x, u0, h, sigma, k, rng, idx, len(sizes))
    return _alg2(model, x, u0, h, sigma, k, rng, clip, idx, len(sizes), penalty=penalty)


# ------------------------------------------------------------------------------ release document

def _rebuild_model(d) -> PenaltyModel:
    if not isinstance(d, dict) or not isinstance(d.get("type"), str) \
            or d["type"] not in PENALTY_MODELS:
        raise ReleaseError("model", f"must be a penalty model, one of {sorted(PENALTY_MODELS)}")
    kw = {k: v for k, v in d.items() if k != "type"}
    flags = [k for k, v in kw.items() if isinstance(v, bool)]
    if flags:
        raise ReleaseError(f"model.{flags[0]}", "must be a number, not true / false")
    try:
        model = PENALTY_MODELS[d["type"]](**kw)
    except (TypeError, ValueError, OverflowError) as exc:   # PrivpostError is a ValueError
        raise ReleaseError("model", str(exc)) from None
    if model.to_dict() != d:         # every hyperparameter as stated (e.g. no bool for a number)
        raise ReleaseError("model", f"{json.dumps(d)[:200]} is not stated as the model reads "
                           f"it ({json.dumps(model.to_dict())[:200]})")
    return model


def _ratio_scale(model, variant: str, h: float, n_owners: int) -> float:
    """``ratio_sd / release_sd`` (module docstring): ``sqrt(N)`` (general), or ``sqrt(N)`` times
    the norm of the statistic's jump ``||φ(θ₀ + h 1) - φ(θ₀)||`` for the largest box move
    (expfam; exact for a linear φ)."""
    if variant == "expfam":
        phi = model.expfam()[0]
        u_ref = model.initial()
        return math.sqrt(n_owners) * float(np.linalg.norm(phi(u_ref + h) - phi(u_ref)))
    return math.sqrt(n_owners)


def _sensitivity(model, variant, h, clip):
    """The proved per-iteration L2 sensitivity of what one owner releases (module docstring)."""
    if variant == "expfam":
        ef = model.expfam()
        if ef is None:
            raise PrivpostError(f"variant='expfam' needs an exponential-family model; "
                                f"{model.name} has no expfam(): use variant='general'")
        return float(ef[3])
    if clip is not None:
        return 2.0 * clip * math.sqrt(model.dim) * h
    delta = model.ratio_sensitivity(h)
    if not math.isfinite(delta):
        raise PrivpostError(f"model {model.name!r} has no proved bound on its log-likelihood "
                            "ratio: pass clip=r (clip each record's ratio to ±r·|θ'-θ|)")
    return delta


#: fields of a transcript document derived from the others (checked on load, never trusted)
_DERIVED = {"h": "h = step * n^-step_exponent", "iterations": "the number of proposals",
            "privacy": "the accountant's (epsilon, delta)",
            "mu_gdp": "mu = sqrt(k) * sensitivity / release_sd"}


def _finite(v) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:           # an integer beyond the float range
        return False


def _close(given, value: float, rel: float = 1e-9) -> bool:
    """A stored derived number equals its recomputation (to a relative ``rel``)."""
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not _finite(given):
        return False
    return math.isclose(float(given), value, rel_tol=rel, abs_tol=0.0)


@dataclass
class PenaltyRelease:
    """The published transcript of a penalty chain (the adversary's view) with its guarantee.

    Attributes
    ----------
    model : PenaltyModel
    variant : "general" | "expfam"
    n : int -- public record count; owner_sizes : list[int] (N,)
    step : float -- c; step_exponent : float -- α; the box half-width is ``h = c n^-α``
    release_sd : float -- sd of the Gaussian noise on each released number: σ of each owner's
        noisy ratio (general), sqrt(ξ) of each coordinate of each owner's Ŝ (expfam)
    ratio_sd : float (property) -- sd of the noise on the log acceptance ratio, all owners
        together (largest box move for expfam): what ``penalty_mcmc(noise_sd=...)`` sets
    sensitivity : float -- proved L2 sensitivity of each release
    clip : float or None
    states : (k+1, d) -- θ_0..θ_k (unconstrained scale); proposals : (k, d);
    released : (k, N) noisy ratios (general) or (k, N·d_φ) noisy statistics (expfam)
    delta : float; accountant : "tight" | "advanced"
    privacy : Privacy -- (ε, δ)-DP of the whole transcript, for each owner, replace-one
    metadata : dict
    """

    model: PenaltyModel
    variant: str
    n: int
    owner_sizes: list
    step: float
    step_exponent: float
    release_sd: float
    sensitivity: float
    clip: float | None
    states: np.ndarray
    proposals: np.ndarray
    released: np.ndarray
    delta: float
    accountant: str
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._validate()

    # --------------------------------------------------------------- facts
    @property
    def h(self) -> float:
        return self.step * self.n ** (-self.step_exponent)

    @property
    def iterations(self) -> int:
        return int(self.proposals.shape[0])

    @property
    def ratio_sd(self) -> float:
        """sd of the noise on the log acceptance ratio, all owners together (expfam: for the
        largest box move): the ``noise_sd`` of :func:`penalty_mcmc`, in both variants."""
        return self.release_sd * _ratio_scale(self.model, self.variant, self.h,
                                              len(self.owner_sizes))

    @property
    def mu(self) -> float:
        """GDP parameter of the whole transcript: sqrt(k) Δ / σ (σ = ``release_sd``)."""
        return math.sqrt(self.iterations) * self.sensitivity / self.release_sd

    def epsilon(self, accountant: str | None = None) -> float:
        from privpost.accounting import gaussian_composition_epsilon
        return gaussian_composition_epsilon(self.release_sd, self.sensitivity, self.iterations,
                                            self.delta, accountant or self.accountant)

    @property
    def privacy(self):
        from privpost.accounting import Privacy
        eps = self.epsilon()
        if not math.isfinite(eps):
            raise ReleaseError("accountant", f"the {self.accountant} accountant certifies no "
                               "finite epsilon for this transcript")
        return Privacy.approx(eps, self.delta)

    @property
    def accepted(self) -> np.ndarray:
        return np.all(self.states[1:] == self.proposals, axis=1)

    # --------------------------------------------------------------- validation
    def _validate(self) -> None:
        if not isinstance(self.model, PenaltyModel):
            raise ReleaseError("model", "must be a penalty model")
        if self.variant not in VARIANTS:
            raise ReleaseError("variant", f"must be one of {VARIANTS}, got {self.variant!r}")
        if self.accountant not in ("tight", "advanced"):
            raise ReleaseError("accountant", f"must be 'tight' or 'advanced', got {self.accountant!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 1:
            raise ReleaseError("n", f"must be an integer >= 1, got {self.n!r}")
        from privpost.limits import check_n

        check_n("n", int(self.n))
        sizes = self.owner_sizes
        if (not isinstance(sizes, list) or not sizes or any(
                isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sizes)
                or sum(sizes) != self.n):
            raise ReleaseError("owner_sizes", f"must be positive integers summing to n = {self.n}")
        from privpost.limits import check_parameter

        for name in ("step", "step_exponent", "release_sd", "sensitivity", "delta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v) or v <= 0:
                raise ReleaseError(name, f"must be a finite number > 0, got {v!r}")
            if name != "delta":     # sizes the accounting can evaluate (privpost.limits)
                try:
                    check_parameter(name, float(v))
                except PrivpostError as exc:
                    raise ReleaseError(name, str(exc)) from None
        if not self.delta < 1:
            raise ReleaseError("delta", "must be below 1")
        if self.clip is not None and (not isinstance(self.clip, (int, float)) or
                                      not math.isfinite(self.clip) or self.clip <= 0):
            raise ReleaseError("clip", f"must be null or a finite number > 0, got {self.clip!r}")
        try:
            needed = _sensitivity(self.model, self.variant, self.h, self.clip)
        except PrivpostError as exc:
            raise ReleaseError("sensitivity", str(exc)) from None
        if self.sensitivity < needed * (1 - 1e-12):
            raise ReleaseError("sensitivity", f"{self.sensitivity} is below the proved bound "
                               f"{needed:g}: the stated guarantee would not hold")
        d = self.model.dim
        arrs = {}
        for name in ("states", "proposals", "released"):
            try:
                a = np.asarray(getattr(self, name), dtype=float)
            except (TypeError, ValueError, OverflowError):   # 10^400: beyond the float range
                raise ReleaseError(name, "must be a list of lists of (finite) numbers") from None
            if a.ndim != 2 or not np.all(np.isfinite(a)):
                raise ReleaseError(name, "must be a finite two-dimensional array")
            arrs[name] = a
        k = arrs["proposals"].shape[0]
        if k < 1 or arrs["proposals"].shape != (k, d) or arrs["states"].shape != (k + 1, d):
            raise ReleaseError("states", f"shapes must be states (k+1, {d}) and proposals "
                               f"(k, {d}); got {arrs['states'].shape}, {arrs['proposals'].shape}")
        m = len(sizes) * (self.model.expfam()[2](np.zeros(1)).shape[1]
                          if self.variant == "expfam" else 1)
        if arrs["released"].shape != (k, m):
            raise ReleaseError("released", f"must have shape ({k}, {m}), got "
                               f"{arrs['released'].shape}")
        st, pr = arrs["states"], arrs["proposals"]
        if np.any(np.abs(pr - st[:-1]) > self.h * (1 + 1e-9)):
            raise ReleaseError("proposals", f"a proposal leaves the box of half-width h = "
                               f"{self.h:g} around its state: the sensitivity bound does not hold")
        moved = np.all(st[1:] == pr, axis=1) | np.all(st[1:] == st[:-1], axis=1)
        if not np.all(moved):
            raise ReleaseError("states", "each state must equal the previous one or the proposal")
        for name, a in arrs.items():
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        from privpost.releases.release import _json_metadata

        object.__setattr__(self, "metadata", _json_metadata(self.metadata))   # plain JSON
        try:
            _ = self.privacy   # the accountant must certify a finite epsilon
        except ReleaseError:
            raise
        except (PrivpostError, OverflowError, ValueError) as exc:
            raise ReleaseError("sensitivity", f"the transcript's guarantee (mu-GDP sqrt(k) "
                               f"sensitivity / release_sd = {self.mu:.6g}) cannot be certified: "
                               f"{exc}") from None

    # --------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "model": self.model.to_dict(), "variant": self.variant,
                "n": int(self.n), "owner_sizes": [int(s) for s in self.owner_sizes],
                "step": self.step, "step_exponent": self.step_exponent, "h": self.h,
                "release_sd": self.release_sd, "ratio_sd": self.ratio_sd,
                "sensitivity": self.sensitivity, "clip": self.clip,
                "iterations": self.iterations, "delta": self.delta,
                "accountant": self.accountant, "privacy": self.privacy.to_dict(),
                "mu_gdp": self.mu,
                "states": self.states.tolist(), "proposals": self.proposals.tolist(),
                "released": self.released.tolist(), "metadata": dict(self.metadata)}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(self.to_json() + "\n")
        return path

    @classmethod
    def from_dict(cls, doc: Any) -> "PenaltyRelease":
        """Validate a transcript document (raises :class:`ReleaseError` naming the field).

        Every field is checked: the required ones build the transcript (validated by
        ``_validate``); the derived ones a document may carry (``h``, ``iterations``,
        ``privacy``, ``mu_gdp``) must equal their recomputation from it (``h = step ·
        n^-step_exponent``, the half-width the sensitivity is proved from; ``mu_gdp = sqrt(k) ·
        sensitivity / release_sd``; both to a relative 1e-9); any other field is refused."""
        if not isinstance(doc, dict):
            raise ReleaseError("document", "must be a JSON object")
        if doc.get("schema") != SCHEMA:
            raise ReleaseError("schema", f"expected {SCHEMA!r}, got {doc.get('schema')!r}")
        req = ("model", "variant", "n", "owner_sizes", "step", "step_exponent",
               "sensitivity", "states", "proposals", "released", "delta", "accountant")
        for key in req:
            if key not in doc:
                raise ReleaseError(key, "is missing")
        # "release_sd"; documents written before issue #23 stored the same number as "noise_sd"
        if ("release_sd" in doc) == ("noise_sd" in doc):
            raise ReleaseError("release_sd", "give the sd of the noise on each released number "
                               "as 'release_sd' (older documents: 'noise_sd'), exactly once")
        release_sd = doc["release_sd"] if "release_sd" in doc else doc["noise_sd"]
        known = set(req) | set(_DERIVED) | {"schema", "clip", "metadata", "release_sd",
                                            "noise_sd", "ratio_sd"}
        unknown = sorted((k for k in doc if k not in known), key=str)
        if unknown:
            raise ReleaseError(str(unknown[0]), "is not a field of a penalty-MCMC transcript "
                               f"(fields: {', '.join(sorted(known))})")
        meta = doc.get("metadata", {})
        if not isinstance(meta, dict):
            raise ReleaseError("metadata", "must be a JSON object")
        rel = cls(model=_rebuild_model(doc["model"]), variant=doc["variant"], n=doc["n"],
                  owner_sizes=doc["owner_sizes"], step=doc["step"],
                  step_exponent=doc["step_exponent"], release_sd=release_sd,
                  sensitivity=doc["sensitivity"], clip=doc.get("clip"), states=doc["states"],
                  proposals=doc["proposals"], released=doc["released"], delta=doc["delta"],
                  accountant=doc["accountant"], metadata=meta)
        if "ratio_sd" in doc:
            got = doc["ratio_sd"]
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isclose(
                    float(got), rel.ratio_sd, rel_tol=1e-9):
                raise ReleaseError("ratio_sd", f"{got!r} disagrees with the value derived from "
                                   f"release_sd ({rel.ratio_sd!r})")
        if "iterations" in doc and (isinstance(doc["iterations"], bool)
                                    or doc["iterations"] != rel.iterations):
            raise ReleaseError("iterations", f"{doc['iterations']!r} disagrees with the "
                               f"transcript length {rel.iterations}")
        for key, value in (("h", rel.h), ("mu_gdp", rel.mu)):
            if key in doc and not _close(doc[key], value):
                raise ReleaseError(key, f"{doc[key]!r} disagrees with its recomputation "
                                   f"{value!r} from the transcript ({_DERIVED[key]})")
        if "privacy" in doc:
            from privpost.releases.release import _check_privacy
            _check_privacy(doc["privacy"], rel.privacy)
        return rel

    @classmethod
    def from_json(cls, text: str) -> "PenaltyRelease":
        """Parse with the release documents' safe reader (nesting depth, huge integers)."""
        from privpost.releases.release import _parse_json

        return cls.from_dict(_parse_json(text))

    @classmethod
    def load(cls, path) -> "PenaltyRelease":
        """Read with the release documents' safe reader: size limit (``max_document_bytes``),
        UTF-8 check, nesting depth -- every failure a :class:`ReleaseError`."""
        from privpost.releases.release import _read_text

        return cls.from_json(_read_text(path))

    # --------------------------------------------------------------- analyst side
    def posterior(self, warmup: int | None = None):
        """Posterior draws: post-processing of the transcript (states after ``warmup``,
        default half of the iterations)."""
        from privpost.inference._gibbs_common import make_posterior

        k = self.iterations
        w = k // 2 if warmup is None else int(warmup)
        if not 0 <= w < k:
            raise PrivpostError(f"warmup must be in 0..{k - 1}, got {warmup!r}")
        u = self.states[w + 1:][None]
        draws = self.model.param_draws(u)
        acc = self.accepted[w:][None]
        alg = ("Algorithm 3 (exponential family)" if self.variant == "expfam" else
               "Algorithm 2" if len(self.owner_sizes) > 1 else "Algorithm 1")
        notes = [f"penalty MCMC ({alg}, Yıldırım 2016): a Metropolis chain whose acceptance "
                 "saw the log-likelihood ratio only through Gaussian noise with the penalty "
                 "variance/2; it targets the NON-private posterior p(theta | records) exactly "
                 "(Monte Carlo error only), and the transcript is "
                 f"{self.privacy} for each of {len(self.owner_sizes)} owner(s) "
                 f"({self.accountant} accountant, {k} iterations, mu-GDP {self.mu:.4g})",
                 f"warmup: the first {w} of {k} iterations are discarded; box random walk "
                 f"with half-width h = {self.h:.4g}"]
        if self.clip is not None:
            notes.append(f"clipping variant: each record's log-likelihood ratio was clipped to "
                         f"±{self.clip:g}·|theta'-theta|; the chain is only approximately "
                         "invariant for the posterior (exact only when no ratio is clipped)")
        return make_posterior(draws, {"accepted": acc}, "penalty-mcmc", self.model, None,
                              notes, exact=self.clip is None)


def run(model, release, *, warmup: int | None = None, seed=None, progress: bool = False):
    """Method ``"penalty-mcmc"`` of :func:`privpost.infer`: the posterior of a published
    penalty-MCMC transcript (``privpost penalty``, ``pp.penalty_mcmc(...).release``).

    The draws are the chain's states after ``warmup`` (default half of the iterations):
    post-processing of the transcript, so no randomness (``seed`` and ``progress`` are accepted
    and unused) and no choice of length (the curator's budget fixed it). The chain targeted the
    posterior of the model it ran with, so ``model`` must be that model (a privpost model is
    converted with :func:`~privpost.models.penalty_models.penalty_model`, the transcript's
    public bounds filled in); another prior would need draws the transcript does not have.

    Raises :class:`~privpost.errors.IncompatibleError` for a release that is not a transcript
    and for a model other than the transcript's.
    """
    from privpost.errors import IncompatibleError

    if not isinstance(release, PenaltyRelease):
        raise IncompatibleError("method 'penalty-mcmc' reads a penalty-MCMC transcript (the "
                                "output of 'privpost penalty' or pp.penalty_mcmc(...).release), "
                                f"not a {type(release).__name__}")
    ran = release.model
    bounds = getattr(ran, "bounds", None)
    if bounds is None and getattr(ran, "upper", None) is not None:
        bounds = (0.0, ran.upper)
    try:
        given = penalty_model(model, bounds=bounds)
    except PrivpostError as exc:
        raise IncompatibleError(f"method 'penalty-mcmc': {exc}") from None
    if given.to_dict() != ran.to_dict():
        raise IncompatibleError(
            f"the transcript's chain ran with the model {json.dumps(ran.to_dict())}: its draws "
            f"are that model's posterior and cannot be turned into {json.dumps(given.to_dict())}'s;"
            " give the transcript's model (its prior included)")
    if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer))):
        raise PrivpostError(f"warmup must be an integer in 0..{release.iterations - 1}, got "
                            f"{warmup!r}")
    from privpost.diagnostics import flag

    post = release.posterior(warmup)
    post.method = "penalty-mcmc"
    flag(post, advice="the transcript's length was fixed by the curator's privacy budget (a "
                      "larger budget, more data or the expfam variant give a longer chain); a "
                      "smaller warmup= keeps more of it")
    return post


@dataclass
class PenaltyResult:
    """What :func:`penalty_mcmc` returns: ``posterior`` (privpost Posterior), ``release``
    (:class:`PenaltyRelease`, the publishable transcript) and ``privacy`` (its guarantee),
    plus ``iterations_allowed`` by each accountant at the chosen noise and ``acceptance``."""

    posterior: Any
    release: PenaltyRelease
    privacy: Any
    iterations_allowed: dict
    acceptance: float

    def summary(self):
        return self.posterior.summary()


def _float_opt(name, value, *, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, str, bytes)):
        raise PrivpostError(f"{name} must be a finite number > 0, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PrivpostError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise PrivpostError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def penalty_mcmc(records, model, *, epsilon, delta, iterations=None, noise_sd=None,
                 step: float = 1.0, step_exponent: float = 0.5, owners=None,
                 variant: str = "general", accountant: str = "tight", clip=None, warmup=None,
                 theta0=None, bounds=None, max_iterations: int = 200_000, seed=None,
                 progress: bool = False) -> PenaltyResult:
    """Run penalty MCMC on the confidential ``records`` at budget ``(epsilon, delta)``.

    Parameters
    ----------
    records : array_like -- (n,) for Bernoulli/normal, (n, p+1) ``[x, y]`` for logistic regression
    model : PenaltyModel, BetaBernoulli, NormalKnownVariance (with ``bounds=``) or a spec string
        (``"bernoulli-logit:a=1,b=1"``, ``"logistic-regression-bounded:p=2,bound=1"``, ...)
    epsilon, delta : the (ε, δ) budget of the whole transcript, per owner, replace-one neighbours
    iterations : int, optional -- k; σ is then calibrated. Default: the largest k at ``noise_sd``.
    noise_sd : float, optional -- sd of the noise on the log acceptance ratio, all owners
        together (per owner σ = ``noise_sd / sqrt(N)``); expfam: for the largest box move. It
        is the transcript's ``ratio_sd`` (its ``release_sd`` is σ, the sd of each released
        number). Given, it is honoured: k is the number of iterations the budget allows at it,
        capped at ``max_iterations`` (then less than the budget is spent; the notes say how
        much). Default 2.4; only the default is lowered when the cap binds, so that
        ``max_iterations`` spend the whole budget (stated in the notes).
    step, step_exponent : the box half-width ``h = step * n**-step_exponent`` (unconstrained scale)
    owners : None, int N (contiguous blocks of records) or one owner label per record (the
        owners' record counts are public and stored in the transcript)
    variant : "general" (Algorithms 1/2) or "expfam" (Algorithm 3)
    accountant : "tight" (exact GDP) or "advanced" (the paper's Theorems 2 + 3)
    clip : float r, optional -- clipping variant (approximate; see module docstring)
    warmup : discarded iterations for the posterior (default k // 2)
    theta0 : (d,) data-free start on the unconstrained scale (default: the model's)
    max_iterations : cap on k when it is derived from the budget (bounds time and memory)
    seed : None (OS entropy: real releases) or int/Generator (simulations)

    Returns
    -------
    PenaltyResult with ``.posterior``, ``.release``, ``.privacy``.
    """
    from privpost.accounting import (calibrate_gaussian_sigma, gaussian_composition_epsilon,
                                     max_gaussian_compositions)
    from privpost.inference._gibbs_common import Progress

    pm = penalty_model(model, bounds=bounds)
    x = pm.validate_records(records)
    n = int(x.shape[0])
    if n < 2:
        raise DataError("records: penalty MCMC needs at least 2 records")
    eps = _float_opt("epsilon", epsilon)
    dlt = _float_opt("delta", delta)
    if not dlt < 1:
        raise PrivpostError(f"delta must be in (0, 1), e.g. 1e-6; got {delta!r}")
    if variant not in VARIANTS:
        raise PrivpostError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if accountant not in ("tight", "advanced"):
        raise PrivpostError(f"accountant must be 'tight' or 'advanced', got {accountant!r}")
    step = _float_opt("step", step)
    alpha = _float_opt("step_exponent", step_exponent)
    clip = _float_opt("clip", clip, allow_none=True)
    if clip is not None and variant == "expfam":
        raise PrivpostError("clip= applies to variant='general' only")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) \
            or max_iterations < 1:
        raise PrivpostError(f"max_iterations must be an integer >= 1, got {max_iterations!r}")
    if noise_sd is not None:
        noise_sd = _float_opt("noise_sd", noise_sd)
        if iterations is not None:
            raise PrivpostError("give iterations= (sigma is then calibrated) or noise_sd= (the "
                                "iterations are then derived), not both")
    try:
        rng = as_generator(seed)
    except (TypeError, ValueError) as exc:
        raise PrivpostError(f"seed: {exc} (use None for a real run, an int >= 0 to reproduce)") \
            from None
    idx, sizes = _owner_index(owners, n)
    N = len(sizes)
    h = step * n ** (-alpha)
    sens = _sensitivity(pm, variant, h, clip)
    to_sd = _ratio_scale(pm, variant, h, N)      # ratio_sd = to_sd * release_sd
    extra_notes = []
    if iterations is not None:
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) \
                or iterations < 1:
            raise PrivpostError(f"iterations must be an integer >= 1, got {iterations!r}")
        k = int(iterations)
        sigma = calibrate_gaussian_sigma(eps, dlt, k, sens, accountant)
    else:
        total_sd = DEFAULT_NOISE_SD if noise_sd is None else noise_sd
        sigma = total_sd / to_sd
        k = max_gaussian_compositions(sigma, sens, eps, dlt, accountant)
        if k < 2:
            raise PrivpostError(
                f"the budget (epsilon={eps:g}, delta={dlt:g}) allows {k} iteration(s) at "
                f"noise_sd={total_sd:g}: increase noise_sd, decrease step, or pass iterations=")
        if k > max_iterations and noise_sd is not None:      # the user's noise: honoured
            extra_notes.append(
                f"noise_sd={total_sd:g} as given: the budget (epsilon={eps:g}, delta={dlt:g}) "
                f"allows {k} iterations at it, capped at max_iterations={int(max_iterations)}; "
                "the transcript therefore spends less than the budget (its privacy above is "
                "exact); raise max_iterations to use the whole budget")
            k = int(max_iterations)
        elif k > max_iterations:        # the default noise: lowered to spend the whole budget
            allowed_at_default = k
            k = int(max_iterations)
            sigma = calibrate_gaussian_sigma(eps, dlt, k, sens, accountant)
            extra_notes.append(
                f"the default noise_sd={total_sd:g} would allow {allowed_at_default} iterations, "
                f"more than max_iterations={k}: the noise sd was lowered to "
                f"{sigma * to_sd:.4g} so that {k} iterations spend the budget; pass noise_sd= "
                "to fix it (it is then honoured)")
    if warmup is not None and (isinstance(warmup, bool) or not isinstance(
            warmup, (int, np.integer)) or not 0 <= warmup < k):
        raise PrivpostError(f"warmup must be an integer in 0..{k - 1} (the budget allows {k} "
                            f"iterations), got {warmup!r}")
    per_iter = 2 * pm.dim + (N * len(pm.expfam()[2](np.zeros(1))[0]) if variant == "expfam"
                             else N)
    if k * per_iter > MAX_TRANSCRIPT_VALUES:
        raise PrivpostError(
            f"{k} iterations with {N} owner(s) would store {k * per_iter:,} numbers (limit "
            f"{MAX_TRANSCRIPT_VALUES:,}): pass a smaller max_iterations= or iterations=")
    allowed = {acc: max_gaussian_compositions(sigma, sens, eps, dlt, acc)
               for acc in ("tight", "advanced")}
    u0 = pm.initial() if theta0 is None else np.asarray(theta0, dtype=float).reshape(-1)
    if u0.shape != (pm.dim,) or not np.all(np.isfinite(u0)):
        raise PrivpostError(f"theta0 must be {pm.dim} finite numbers (unconstrained scale)")
    prog = Progress(k, progress, "penalty-mcmc")
    if variant == "expfam":
        states, props, released = _alg3(pm, x, u0, h, sigma, k, rng, idx, N, prog)
    else:
        states, props, released = _alg2(pm, x, u0, h, sigma, k, rng, clip, idx, N,
                                        progress=prog)
    meta = {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "seeded": seed is not None, "epsilon_target": eps,
            "noise_sd_given": noise_sd,
            "epsilon_other_accountant": gaussian_composition_epsilon(
                sigma, sens, k, dlt, "advanced" if accountant == "tight" else "tight"),
            "iterations_allowed": allowed}
    if not math.isfinite(meta["epsilon_other_accountant"]):
        meta["epsilon_other_accountant"] = None
    rel = PenaltyRelease(pm, variant, n, sizes, step, alpha, float(sigma), float(sens), clip,
                         states, props, released, dlt, accountant, meta)
    post = rel.posterior(warmup)
    post.notes.extend(extra_notes)
    acc_rate = float(rel.accepted.mean())
    _check_convergence(post)
    return PenaltyResult(post, rel, rel.privacy, allowed, acc_rate)


def _check_convergence(post, min_ess: float = 100.0) -> None:
    """Loud warning (and a note) when the bulk ESS of any coordinate is below ``min_ess``."""
    from privpost.diagnostics import ess_bulk   # = arviz-stats' bulk ESS, without ArviZ

    worst = math.inf
    for name in post.param_names:
        arr = post.draws[name]
        flat = arr.reshape(arr.shape[0], arr.shape[1], -1)
        for j in range(flat.shape[2]):
            e = ess_bulk(flat[:, :, j])
            worst = min(worst, e if math.isfinite(e) else 0.0)
    if worst < min_ess:
        msg = (f"penalty-mcmc: bulk ESS {worst:.0f} < {min_ess:.0f}: the chain allowed by this "
               "budget has not explored the posterior well; its summaries are unreliable "
               "(a larger epsilon/delta, larger n, or an exponential-family variant help)")
        post.notes.append(msg)
        warnings.warn(msg, stacklevel=3)
