"""The two fits on one censored mean-log statistic s_L (seed 002) that both the DPss methods
(:mod:`privpost.inference.compositional`) and the priors built from the D1 part of a split release
(:mod:`privpost.inference.compositional_priors`: p4 from DPBoots, p5 from DPMCMC) run: below both,
so neither imports the other for them."""

from __future__ import annotations

import numpy as np

from privpost._rng import as_generator
from privpost.errors import IncompatibleError
from privpost.models.dirichlet_tools import censored_mean_logs, dirichlet_mle, mle_exists

__all__ = ["dpboots_draws", "dpmcmc_posterior", "INIT_NOTE"]


def _laplace(rng, scale, size):
    return rng.laplace(0.0, scale, size=size)


def dpboots_draws(s_L, scale, a, n, B, rng, *, max_proposals: int = 10 ** 7):
    """DPBoots (Algorithm 2 with the prose's censored step v); returns ``((B, D), n_dropped)``.

    i-ii) ``e ~ Laplace(0, scale)^D`` truncated to ``{e : sum_j exp(s_L - e) < 1}`` (rejection);
    iii) ``alpha* = MLE(s_L - e)``; iv) ``n`` records from Dir(alpha*); v) ``alpha~ =
    MLE(S_0(D~, a))`` censored at the released ``a``; **no fresh noise** (extract pitfall 7).
    Replicates whose step-v MLE does not exist are redrawn (counted in ``n_dropped``).
    """
    s_L = np.asarray(s_L, dtype=np.float64)
    D = s_L.size
    out, dropped, proposed = [], 0, 0
    need = B
    while need > 0:
        m = max(64, 2 * need)
        acc = []
        while sum(len(x) for x in acc) < need:
            e = _laplace(rng, scale, (m, D))
            proposed += m
            keep = mle_exists(s_L - e)
            acc.append(e[keep])
            if proposed > max_proposals:
                raise IncompatibleError(
                    "DPBoots: fewer than 1 in 10^7 Laplace draws put the de-noised statistic in "
                    "the range of the Dirichlet mean-log (sum_j exp(s_j) < 1): the release's "
                    "noise scale is too large for a bootstrap; use dpmcmc")
        e = np.concatenate(acc)[:need]
        a_star = dirichlet_mle(s_L - e)
        a_star = a_star[np.all(np.isfinite(a_star), axis=1)]
        S = censored_mean_logs(a_star, n, a, rng)
        a_t = dirichlet_mle(S)
        ok = np.all(np.isfinite(a_t), axis=1)
        dropped += int((~ok).sum()) + (need - a_star.shape[0])
        out.append(a_t[ok])
        need = B - sum(len(x) for x in out)
    return np.concatenate(out)[:B], dropped


#: the note of a run started by :func:`_init_from`
INIT_NOTE = ("start: chain c at the Dirichlet MLE of the release's statistic re-noised with "
             "fresh mechanism noise (dispersed starts; the observed statistic's MLE where the "
             "re-noised one has none)")


def _init_from(rel, opts: dict):
    """One start per chain: ``alpha_c = MLE(s_L + fresh Laplace noise)``, so the starts spread
    about as much as the statistic is uncertain and split R-hat can see chains that settle in
    different places (one shared start hid that; issue 10). ``None`` when even the observed
    statistic has no MLE (damcmc's own start then applies). ``opts``: damcmc's options (reads
    ``chains``, ``seed``; the start's generator is drawn from ``seed``'s)."""
    import inspect

    from privpost.inference import damcmc

    chains = opts.get("chains", inspect.signature(damcmc.run).parameters["chains"].default)
    observed = np.asarray(rel.observed, dtype=np.float64)
    a_obs = dirichlet_mle(observed)
    if not np.all(np.isfinite(a_obs)):
        return None
    seed = opts.get("seed")
    rng = as_generator(seed)
    if seed is None or isinstance(seed, (int, np.integer)):
        opts["seed"] = rng                      # one stream: the starts, then the chains
    start_rng = np.random.default_rng(rng.integers(2 ** 63))
    inits = []
    for _ in range(int(chains)):
        try:
            s = np.asarray(rel.mechanism.sample(observed, seed=start_rng), dtype=np.float64)
            a = dirichlet_mle(s.reshape(observed.shape))
        except Exception:  # noqa: BLE001 - a start is a heuristic: fall back to the observed MLE
            a = a_obs
        inits.append({"alpha": a if np.all(np.isfinite(a)) else a_obs})
    return inits


def dpmcmc_posterior(model, rel, **opts):
    """``damcmc`` on one CensoredLogMean release, each chain started at the MLE of a re-noised
    s_L (:func:`_init_from`) when the observed s_L has an MLE."""
    from privpost.inference import damcmc

    dispersed = opts.get("init") is None
    if dispersed:
        opts["init"] = _init_from(rel, opts)
    post = damcmc.run(model, rel, **opts)
    if dispersed and opts["init"] is not None:
        post.notes.append(INIT_NOTE)
    return post
