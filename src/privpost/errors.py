"""Exception types raised by privpost.

Every error a user can cause (a malformed release, a model that does not fit a release, a CSV
with a missing column) is a subclass of :class:`PrivpostError`, so the command-line interface can
catch it and print one clear line instead of a traceback.
"""

from __future__ import annotations


class PrivpostError(ValueError):
    """Base class of every user-facing privpost error."""


class ReleaseError(PrivpostError):
    """A release document is malformed or internally inconsistent.

    The message always names the offending field, e.g. ``"mechanism.epsilon: must be > 0"``.
    """

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class IncompatibleError(PrivpostError):
    """A model, a release and a method do not fit together (checked before sampling)."""


class DataError(PrivpostError):
    """Confidential records (an array, a CSV or Parquet file) cannot be used as given."""


class ConvergenceWarning(UserWarning):
    """A finished MCMC run misses the convergence thresholds (split R-hat <= 1.01, bulk and tail
    ESS >= 400; Vehtari et al. 2021): its estimates are unreliable. Issued by the samplers at the
    end of a run (:func:`privpost.diagnostics.flag`); turn it into an error with
    ``warnings.simplefilter("error", ConvergenceWarning)`` or ``privpost infer --strict``."""


class ModelFitWarning(UserWarning):
    """The model does not reproduce the release: the posterior predictive check of the released
    statistic fails (joint p < 0.01, :mod:`privpost.predictive`), or the model assumes a law the
    release's description contradicts (e.g. a regression covariate modelled as normal by
    default). The posterior is exact *for the model*; the model is what is in doubt."""
