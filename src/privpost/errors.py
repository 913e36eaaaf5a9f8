"""Exception types raised by privpost.

Every error a user can cause (a malformed release, a model that does not fit a release, a CSV
with a missing column) is a subclass of :class:`PrivpostError`, so the command-line interface can
catch it and print one clear line instead of a traceback.
"""

from __future__ import annotations


#: the longest message (characters) a :class:`PrivpostError` carries; see :func:`bounded`
MAX_MESSAGE = 2000


def bounded(text, limit: int = MAX_MESSAGE) -> str:
    """``text`` (any object, as ``str``) cut to about ``limit`` characters: the head and the
    tail are kept and the middle is replaced by ``... [N characters omitted] ...``, so an error
    never echoes megabytes of hostile input (a 10^6-character cell or column name, a document's
    unknown key). Used by :class:`PrivpostError` for every message and by the CLI's error
    printer."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = (2 * limit) // 3
    tail = limit - head
    return f"{text[:head]} ... [{len(text) - limit} characters omitted] ... {text[-tail:]}"


class PrivpostError(ValueError):
    """Base class of every user-facing privpost error. Its message is :func:`bounded`."""

    def __init__(self, *args):
        super().__init__(*(bounded(a) if isinstance(a, str) else a for a in args))


class ReleaseError(PrivpostError):
    """A release document is malformed or internally inconsistent.

    The message always names the offending field, e.g. ``"mechanism.epsilon: must be > 0"``.
    """

    def __init__(self, field: str, problem: str):
        self.field = bounded(field, 200)
        self.problem = bounded(problem)
        super().__init__(f"{self.field}: {self.problem}")


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
