"""Plumbing shared by the sufficient-statistic methods (gibbs-ss, naive, nonprivate, ops):
option checking, the noise model of a release, and building the :class:`Posterior`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privpost.errors import IncompatibleError, PrivpostError

__all__ = ["check_sampler_options", "NoiseModel", "noise_model", "make_posterior", "Progress",
           "model_dict", "release_dict"]


def _int_option(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PrivpostError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_sampler_options(draws, warmup, chains):
    """Validate the common sampler options; returns them as ints."""
    return (_int_option("draws", draws, 1), _int_option("warmup", warmup, 0),
            _int_option("chains", chains, 1))


def reject_unknown(method: str, options: dict) -> None:
    """Raise a clear error for options a method does not take (typos must not pass silently)."""
    if options:
        names = ", ".join(sorted(options))
        raise PrivpostError(f"method {method!r} got unexpected option(s): {names}")


@dataclass(frozen=True)
class NoiseModel:
    """How the released coordinates are corrupted, as the Gibbs sampler sees it.

    ``kind == "laplace"``: i.i.d. ``Laplace(0, scale)`` (scale-mixture augmentation);
    ``kind == "gaussian"``: i.i.d. ``N(0, scale^2)`` (conditioned on directly).
    ``approximate`` holds a note when a discrete mechanism is replaced by its continuous
    counterpart.
    """

    kind: str
    scale: float
    approximate: str | None = None


def noise_model(release) -> NoiseModel:
    """The :class:`NoiseModel` of ``release.mechanism`` (IncompatibleError if unsupported)."""
    mech = release.mechanism
    name = getattr(mech, "name", type(mech).__name__)
    scale = getattr(mech, "scale", None)
    if scale is None or not (float(scale) > 0 and math.isfinite(float(scale))):
        raise IncompatibleError(f"mechanism {name!r} is not calibrated (no finite noise scale)")
    scale = float(scale)
    if name == "laplace":
        return NoiseModel("laplace", scale)
    if name == "gaussian":
        return NoiseModel("gaussian", scale)
    if name == "discrete_laplace":
        return NoiseModel("laplace", scale,
                          "discrete Laplace noise (pmf ∝ exp(-|z|/t)) is modelled by the "
                          f"continuous Laplace density with the same scale t = {scale:g}, "
                          "consistent with the CLT's continuous statistic")
    if name == "discrete_gaussian":
        return NoiseModel("gaussian", scale,
                          "discrete Gaussian noise is modelled by the continuous N(0, sigma^2) "
                          f"with the same sigma = {scale:g}, consistent with the CLT's "
                          "continuous statistic")
    raise IncompatibleError(
        f"the sufficient-statistic methods need additive noise on a sum-type statistic "
        f"(laplace, gaussian, discrete_laplace, discrete_gaussian), not {name!r}; "
        "use method='damcmc' for other mechanisms")


def model_dict(model):
    try:
        return model.to_dict()
    except Exception:  # noqa: BLE001 - a user model without serialisation still gets a result
        return {"type": getattr(model, "name", type(model).__name__)}


def release_dict(release):
    if release is None:
        return None
    try:
        return release.to_dict()
    except Exception:  # noqa: BLE001
        return None


def make_posterior(draws, sample_stats, method, model, release, notes, exact, chain_stats=None):
    from privpost.posterior import Posterior

    return Posterior(draws=draws, sample_stats=sample_stats, method=method,
                     model=model_dict(model), release=release_dict(release), notes=list(notes),
                     exact=exact, chain_stats=chain_stats or {})


class Progress:
    """Progress of a sampler loop: the Rich bar every method shows
    (:class:`privpost.inference._progress.ProgressBar`)."""

    def __init__(self, total: int, enabled: bool, label: str):
        from privpost.inference._progress import ProgressBar

        self._bar = ProgressBar(total, enabled, label)
        self.total, self.enabled, self.label = self._bar.total, self._bar.enabled, label

    def update(self, i: int) -> None:
        self._bar.update(i)
