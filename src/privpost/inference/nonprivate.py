"""``method="nonprivate"``: the posterior given the confidential records (simulation studies).

``infer(model, release, method="nonprivate", records=x)`` draws from ``p(theta | x)``, the
reference every private method is compared with. It reads the confidential records, so it is
**not** private and must never be run on real confidential data that is meant to stay private.
The release (optional, may be ``None``) is only used to check the record count and, with
``clamp=True``, to apply the query's clamping to the records first.

Draws: for the conjugate exponential families of :mod:`privpost.inference.expfam` an exact
vectorised conjugate draw from the statistic; for every other model, the model's own
``update`` kernel iterated per chain (i.i.d. draws for conjugate models; a Markov chain with
``warmup`` discarded iterations otherwise, checked by :func:`privpost.diagnostics.flag`: a
ConvergenceWarning, a ``NOT CONVERGED`` note and ``converged=False`` when it misses split
R-hat <= 1.01 or bulk/tail ESS >= 400).

Options: ``records`` (required), ``draws`` (1000), ``chains`` (4), ``warmup`` (0 for conjugate
models, else 1000), ``seed``, ``progress``, ``clamp`` (False): with a ``Sum``/``Mean`` release
the records are clamped to the query bounds, with ``RegressionStats`` each column is clamped to
its bounds -- the posterior that noise-aware exact methods approach as ``epsilon -> inf``
(seed 000 S-5). ``clamp`` is refused for other queries (a ``TruncatedSum`` drops records, which
is not a transformation of the records the model describes).
"""

from __future__ import annotations

import numpy as np

from privpost._rng import as_generator
from privpost.errors import DataError, IncompatibleError
from privpost.inference import expfam
from privpost.inference._gibbs_common import (Progress, check_sampler_options, make_posterior,
                                              reject_unknown)

__all__ = ["run"]


def _clamp(records, release):
    q = release.query
    name = getattr(q, "name", "")
    if name in ("sum", "mean"):
        lo, hi = q.bounds
        return np.clip(records, lo, hi), f"records clamped to the query bounds [{lo:g}, {hi:g}]"
    if name == "regression_stats":
        lo = np.array([b[0] for b in q.bounds_x] + [q.bounds_y[0]])
        hi = np.array([b[1] for b in q.bounds_x] + [q.bounds_y[1]])
        return np.clip(records, lo, hi), "records clamped column-wise to the query bounds"
    raise IncompatibleError(f"clamp=True is defined for Sum, Mean and RegressionStats releases, "
                            f"not {name!r}")


def run(model, release=None, *, records=None, draws: int = 1000, chains: int = 4,
        warmup: int | None = None, seed=None, progress: bool = False, clamp: bool = False,
        **options):
    """Posterior given the confidential ``records`` (see the module docstring)."""
    reject_unknown("nonprivate", options)
    if records is None:
        raise IncompatibleError("method='nonprivate' needs the confidential records: "
                                "infer(model, release, method='nonprivate', records=x)")
    conj = bool(getattr(model, "conjugate", False))
    if warmup is None:
        warmup = 0 if conj else 1000
    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    validate = getattr(model, "validate_records", None)
    x = validate(records) if validate is not None else np.asarray(records)
    notes = ["nonprivate: posterior given the confidential records (not private; for "
             "simulation studies)"]
    if release is not None and int(release.n) != x.shape[0]:
        raise DataError(f"records has {x.shape[0]} rows but the release says n = {release.n}")
    if clamp:
        if release is None:
            raise IncompatibleError("clamp=True needs the release (its query has the bounds)")
        x, msg = _clamp(x, release)
        notes.append(msg)
    rng = as_generator(seed)
    fam = expfam.family_for(model)
    if fam is not None:
        from privpost.inference.naive import conjugate_draws

        if fam.kind == "categorical":
            s = np.bincount(x.astype(np.int64), minlength=len(fam.prior(model)["alpha"]))
            s = s.astype(np.float64)
        else:
            s = np.array([float(np.sum(x))])
        out = conjugate_draws(model, {"s": s}, x.shape[0], draws, chains, rng)
        return make_posterior(out, {}, "nonprivate", model, release, notes, exact=False)
    out = {nm: np.empty((chains, draws) + tuple(sh)) for nm, sh in model.param_shapes.items()}
    bar = Progress(chains * (warmup + draws), progress, "nonprivate")
    k = 0
    for c in range(chains):
        params = model.prior_sample(rng)
        for it in range(warmup + draws):
            params = model.update(params, x, rng)
            j = it - warmup
            if j >= 0:
                for nm in out:
                    out[nm][c, j] = params[nm]
            bar.update(k)
            k += 1
    if not conj:
        notes.append(f"draws from the model's update kernel (MCMC, {warmup} warm-up iterations)")
    post = make_posterior(out, {}, "nonprivate", model, release, notes, exact=False)
    if not conj:     # a Markov chain: checked like every MCMC method's draws
        from privpost.diagnostics import flag
        flag(post, stacklevel=4)   # warning + note when R-hat > 1.01 or ESS < 400
    return post
