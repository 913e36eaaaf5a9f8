"""Exact posterior from randomized-response reports (method ``"randomized-response"``).

A randomized-response release holds one report ``r_i`` per record: the true category ``c_i`` with
probability ``q_keep = e^ε / (e^ε + k - 1)``, any other category with probability
``q_other = 1 / (e^ε + k - 1)`` (:class:`privpost.mechanisms.RandomizedResponse`). With the
Dirichlet--categorical model ``c_i ~ Categorical(p)``, ``p ~ Dirichlet(alpha)`` the likelihood is
a product over records, ``prod_i sum_c p_c q(r_i | c)``, and this data-augmentation Gibbs sampler
targets the exact posterior:

1. latent true categories: for each reported level ``r`` (``m_r`` reports), the true categories
   of those records are ``Multinomial(m_r, w_r)`` with ``w_r(c) ∝ p_c q(r | c)`` (the records
   are exchangeable given their report, so only the counts matter: cost ``O(k^2)`` per
   iteration, whatever ``n``);
2. ``p | c ~ Dirichlet(alpha + counts(c))``.

Both steps are exact conditional draws, so the chain is invariant for ``p(p, c | r)``.
Options: ``draws`` (1000), ``warmup`` (500), ``chains`` (4), ``seed``, ``progress``. The
chains are checked like every MCMC method's (:func:`privpost.diagnostics.flag`:
ConvergenceWarning, ``NOT CONVERGED`` note, ``converged=False`` when split R-hat > 1.01 or
bulk/tail ESS < 400).
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import IncompatibleError

__all__ = ["run", "report_counts", "transition_matrix"]


def transition_matrix(mechanism) -> np.ndarray:
    """``Q[c, r] = P(report r | true c)``, shape ``(k, k)``."""
    k = int(mechanism.categories)
    keep, other = math.exp(mechanism.log_keep), math.exp(mechanism.log_other)
    return np.full((k, k), other) + np.eye(k) * (keep - other)


def report_counts(release) -> np.ndarray:
    """Number of reports of each level, shape ``(k,)``."""
    k = int(release.mechanism.categories)
    return np.bincount(np.asarray(release.observed, dtype=np.int64), minlength=k).astype(float)


def run(model, release, *, draws: int = 1000, warmup: int = 500, chains: int = 4, seed=None,
        progress: bool = False, **options):
    """Exact posterior of a Dirichlet--categorical model from randomized-response reports."""
    from privpost._rng import as_generator
    from privpost.inference._gibbs_common import (Progress, check_sampler_options,
                                                  make_posterior, reject_unknown)
    from privpost.inference import reject_release_set

    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    reject_unknown("randomized-response", options)
    reject_release_set("randomized-response", release)
    mech = getattr(release, "mechanism", None)
    if getattr(mech, "name", None) != "randomized_response":
        raise IncompatibleError("method 'randomized-response' reads randomized-response releases; "
                                "this release uses " + str(getattr(mech, "name", mech)) +
                                " noise (use damcmc)")
    if getattr(model, "name", None) != "dirichlet-categorical":
        raise IncompatibleError("method 'randomized-response' needs the dirichlet-categorical "
                                f"model (categories of the records), not {model.name!r}")
    model.check_query(release.query)
    k = int(mech.categories)
    Q = transition_matrix(mech)
    m = report_counts(release)
    alpha = np.asarray(model.alpha, dtype=float)
    rng = as_generator(seed)
    out = np.empty((chains, draws, k))
    bar = Progress(chains * (warmup + draws), progress, "randomized-response")
    it = 0
    for c in range(chains):
        p = rng.dirichlet(alpha)
        for i in range(warmup + draws):
            w = p[:, None] * Q                    # (true c, report r) ∝ P(c) P(r | c)
            w /= w.sum(axis=0, keepdims=True)
            counts = np.zeros(k)
            for r in range(k):
                if m[r] > 0:
                    counts += rng.multinomial(int(m[r]), w[:, r])
            p = rng.dirichlet(alpha + counts)
            if i >= warmup:
                out[c, i - warmup] = p
            bar.update(it)
            it += 1
    notes = ["exact: data augmentation over the true categories of the randomized-response "
             f"reports (keep probability {Q[0, 0]:.4g}, {mech.epsilon:g}-DP per record)"]
    post = make_posterior({"p": out}, {}, "randomized-response", model, release, notes,
                          exact=True)
    from privpost.diagnostics import flag
    flag(post, stacklevel=4)   # warning + note when R-hat > 1.01 or ESS < 400
    return post
