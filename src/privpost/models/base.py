"""The :class:`Model` protocol, the model registry and the spec parser.

A *model* is what the analyst believes generated the confidential records: a prior on the
parameters, a record simulator, and a kernel that updates the parameters given complete records.
Inference methods only talk to a model through the methods below, so any object that implements
them (built in or written by a user) works with every method that needs only those methods.

The protocol
------------
``name`` (class attribute)
    Registry key, lower case with hyphens (``"beta-bernoulli"``); used by :func:`model_from_spec`
    and in ``to_dict()["type"]``.
``param_shapes``
    ``dict`` parameter name -> shape of one draw (``()`` for a scalar). Every ``params`` dict the
    model returns has exactly these keys, with ``float64`` values of these shapes.
``prior_sample(rng) -> params``
    One draw from the prior.
``simulate(params, n, rng) -> records``
    ``n`` i.i.d. records from ``f(. | params)`` in the **record layout of the queries**
    (``docs/internals.md``, "Records"). Must be vectorised: data augmentation MCMC calls it once
    per sweep to draw all ``n`` proposals at once.
``update(params, records, rng) -> params``
    One draw of a Markov kernel whose invariant law is ``p(theta | records)``: an exact conjugate
    draw (then ``params`` is ignored) or an MCMC step started at ``params``. ``records`` are the
    latent confidential records on their **original, unclamped scale** (clamping belongs to the
    query). Called once per DA-MCMC iteration: keep it cheap (no ``scipy.stats`` objects; use
    ``rng`` methods and cached factorisations).
``log_likelihood(params, records) -> (n,)``
    Per-record ``log f(x_i | params)``, normalised.
``log_prior(params) -> float``
    Normalised log prior density (optional; used by penalty MCMC and by tests).
``check_query(query)``
    Raise :class:`~privpost.errors.IncompatibleError` with a message saying what fits when the
    query's records cannot come from this model (wrong query type, wrong dimension).
``hyperparameters() -> dict``
    JSON-compatible constructor arguments; ``to_dict`` / ``from_dict`` are built on it.

Optional:

* ``nonprivate_posterior(records)``: closed-form conjugate posterior (set ``conjugate = True``).
  It returns constructor hyperparameters, so ``type(model)(**{**model.hyperparameters(), **post})``
  is the posterior written as a prior;
* ``validate_records(records)``: coerce user data, raise :class:`~privpost.errors.DataError`;
* ``posterior_predictive(params, n, rng)``: defaults to ``simulate``;
* ``compiled_model()``: Numba versions of ``update`` and ``simulate`` for the fully compiled
  DA-MCMC driver (``docs/internals.md``, "Compiled fast path for DA-MCMC"). Every built-in model
  has one (``Dirichlet`` only for its independent Gamma prior with univariate slice sampling);
  they draw from the ``Generator`` in the same order as the Python methods, so both paths give
  the same chain for the same seed.
* the *non-centred protocol*, used by ``damcmc(..., interweave=...)`` (an exact extra
  theta-move with the records' innovations held fixed; ``docs/internals.md``, "Interweaving"):
  ``interweave_params`` (tuple of parameter names the move changes; the others stay fixed),
  ``innovations(params, records, rng) -> u`` (a draw of ``u | x, theta`` such that
  ``x = from_innovations(params, u)`` and ``u`` has a theta-free density given theta: for
  continuous records a deterministic inverse map, for discrete ones a randomised one, e.g.
  Bernoulli ``u | x=1 ~ U(0, theta)``), ``from_innovations(params, u) -> records`` (the map
  ``g(theta, u)``, vectorised) and ``log_prior(params)`` (``-inf`` outside the support; only
  ratios are used). ``BetaBernoulli`` and ``LinearRegression`` (moving ``beta``) implement it.

``rng`` arguments are :class:`numpy.random.Generator` objects; ``prior_sample`` and ``simulate``
also accept a seed (anything :func:`privpost._rng.as_generator` takes). ``update`` is on the hot
path and requires a ``Generator``.

Adding a model
--------------
Subclass :class:`Model`, set ``name``, implement the methods above and register the class with
:func:`register_model` so that specs (``"name:key=value,..."``) and saved posteriors find it.
A complete user model in plain NumPy -- Poisson counts with a log-normal prior on the rate, which
is not conjugate, so ``update`` is a random-walk Metropolis step on ``log(lam)`` (any kernel that
leaves ``p(lam | records)`` invariant is valid for data augmentation MCMC)::

    # --- example: user model ---
    import math
    import numpy as np
    from privpost.errors import IncompatibleError
    from scipy.special import gammaln
    from privpost.models import Model, model_from_spec, query_kind, register_model

    @register_model
    class PoissonLogNormal(Model):
        '''Counts x_i ~ Poisson(lam), log(lam) ~ N(mu, s^2). Records: float (n,).'''

        name = "poisson-lognormal"

        def __init__(self, mu=0.0, s=1.0, step=0.3):
            if not s > 0 or not step > 0:
                raise ValueError("s and step must be > 0")
            self.mu, self.s, self.step = float(mu), float(s), float(step)
            self.param_shapes = {"lam": ()}

        def hyperparameters(self):
            return {"mu": self.mu, "s": self.s, "step": self.step}

        def prior_sample(self, rng):
            return {"lam": np.float64(math.exp(self.mu + self.s * rng.standard_normal()))}

        def simulate(self, params, n, rng):
            return rng.poisson(params["lam"], size=n).astype(np.float64)

        def _log_post(self, log_lam, total, n):  # log p(log lam | records), up to a constant
            return (total * log_lam - n * math.exp(log_lam)
                    - 0.5 * ((log_lam - self.mu) / self.s) ** 2)

        def update(self, params, records, rng):  # random-walk Metropolis on log(lam)
            total, n = float(records.sum()), records.shape[0]
            cur = math.log(params["lam"])
            prop = cur + self.step * rng.standard_normal()
            if math.log(rng.random()) < self._log_post(prop, total, n) - self._log_post(cur, total, n):
                cur = prop
            return {"lam": np.float64(math.exp(cur))}

        def log_likelihood(self, params, records):
            lam = float(params["lam"])
            return records * math.log(lam) - lam - gammaln(records + 1.0)

        def log_prior(self, params):
            log_lam = math.log(params["lam"])
            return (-log_lam - math.log(self.s * math.sqrt(2 * math.pi))
                    - 0.5 * ((log_lam - self.mu) / self.s) ** 2)

        def check_query(self, query):
            if query_kind(query) not in ("sum", "mean", "truncatedsum"):
                raise IncompatibleError(f"{self.name} fits Sum, Mean or TruncatedSum, not {query_kind(query)}")

    model = model_from_spec("poisson-lognormal:mu=1,s=0.5")
    # --- end example ---

Test a new model the way
``tests/test_models.py`` tests the built-in ones: shapes of ``prior_sample``/``simulate``,
moments of ``simulate``, and invariance of ``update`` (e.g. prior -> simulate -> update returns
prior draws: the "prior predictive" check).

Spec strings
------------
:func:`model_from_spec` parses ``"name"`` or ``"name:key=value,key=value"``. Values are numbers,
``true``/``false``, ``none``, or bare words (strings). A vector is written with ``;`` between
entries (``alpha=1;1;1``); a matrix with ``|`` between rows and ``;`` within a row
(``S=1;0.5|0.5;1``). Underscores and hyphens in the model name are interchangeable. A JSON object
(``'{"type": "beta-bernoulli", "a": 1}'``) or a ``dict`` is passed to :func:`model_from_dict`.
"""

from __future__ import annotations

import abc
import inspect
import json
import math
import re
from typing import Any, ClassVar

import numpy as np

from privpost._rng import as_generator
from privpost.errors import DataError, IncompatibleError, PrivpostError

__all__ = [
    "Model",
    "MODELS",
    "register_model",
    "model_from_dict",
    "model_from_spec",
    "query_kind",
]

#: Registry: model name -> class. Filled by :func:`register_model`.
MODELS: dict[str, type["Model"]] = {}


class Model(abc.ABC):
    """Base class of every model (see the module docstring for the protocol)."""

    name: ClassVar[str] = "model"
    #: True when :meth:`nonprivate_posterior` has a closed form.
    conjugate: ClassVar[bool] = False
    param_shapes: dict[str, tuple[int, ...]]

    # ------------------------------------------------------------------ required
    @abc.abstractmethod
    def prior_sample(self, rng) -> dict[str, np.ndarray]:
        """One draw from the prior: ``{name: array of param_shapes[name]}``."""

    @abc.abstractmethod
    def simulate(self, params: dict, n: int, rng) -> np.ndarray:
        """``n`` i.i.d. records from ``f(. | params)`` (the model's record layout)."""

    @abc.abstractmethod
    def update(self, params: dict, records: np.ndarray, rng: np.random.Generator) -> dict:
        """One draw of a kernel invariant for ``p(theta | records)``."""

    @abc.abstractmethod
    def log_likelihood(self, params: dict, records: np.ndarray) -> np.ndarray:
        """Per-record log density ``log f(x_i | params)``, shape ``(n,)``."""

    @abc.abstractmethod
    def check_query(self, query) -> None:
        """Raise :class:`IncompatibleError` when ``query`` does not fit this model's records."""

    @abc.abstractmethod
    def hyperparameters(self) -> dict[str, Any]:
        """JSON-compatible constructor keyword arguments."""

    # ------------------------------------------------------------------ optional
    def log_prior(self, params: dict) -> float:
        """Normalised log prior density of ``params``."""
        raise NotImplementedError(f"model {self.name!r} does not implement log_prior")

    def nonprivate_posterior(self, records) -> dict[str, Any]:
        """Closed-form posterior given complete records (conjugate models).

        Returns a dict of constructor hyperparameters: the posterior is the model's prior with
        these values, ``type(self)(**{**self.hyperparameters(), **result})``.
        """
        raise NotImplementedError(
            f"model {self.name!r} has no closed-form posterior; draw from it by iterating update()")

    def posterior_predictive(self, params: dict, n: int, rng) -> np.ndarray:
        """Records from the posterior predictive given one posterior draw (= :meth:`simulate`)."""
        return self.simulate(params, n, rng)

    def validate_records(self, records) -> np.ndarray:
        """Coerce confidential records to this model's layout (raise :class:`DataError`)."""
        return np.asarray(records, dtype=np.float64)

    def log_joint(self, params: dict, records) -> float:
        """``log_prior(params) + sum(log_likelihood(params, records))``."""
        return float(self.log_prior(params) + np.sum(self.log_likelihood(params, records)))

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """``{"type": name, **hyperparameters}`` (JSON-compatible)."""
        return {"type": self.name, **_jsonable(self.hyperparameters())}

    @classmethod
    def from_dict(cls, d: dict) -> "Model":
        d = dict(d)
        kind = d.pop("type", cls.name)
        if _norm_name(kind) != _norm_name(cls.name):
            raise PrivpostError(f"model dict has type {kind!r}, expected {cls.name!r}")
        return _construct(cls, d)

    def to_spec(self) -> str:
        """The CLI spec string of this model (inverse of :func:`model_from_spec`)."""
        parts = [f"{k}={_format_value(v)}" for k, v in self.hyperparameters().items() if v is not None]
        return self.name + (":" + ",".join(parts) if parts else "")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in _jsonable(self.hyperparameters()).items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------------ helpers for subclasses
    def _incompatible(self, query, fits: str, detail: str | None = None) -> IncompatibleError:
        qn = getattr(query, "name", type(query).__name__)
        msg = f"model {self.name!r} cannot explain a {qn!r} release"
        if detail:
            msg += f": {detail}"
        msg += f" (this model fits: {fits})"
        return IncompatibleError(msg)

    def _require_kind(self, query, kinds: dict[str, str]) -> str:
        """Check the query type; ``kinds`` maps normalised kind -> display name."""
        kind = query_kind(query)
        if kind not in kinds:
            raise self._incompatible(query, ", ".join(kinds.values()),
                                     f"{self._records_doc()} cannot produce this statistic")
        return kind

    def _records_doc(self) -> str:
        return f"its records ({getattr(self, 'records_doc', 'see the model docstring')})"


# ---------------------------------------------------------------------- registry
def register_model(cls=None, *, replace: bool = False):
    """Class decorator adding a :class:`Model` subclass to :data:`MODELS` under ``cls.name``."""

    def deco(c):
        if not (isinstance(c, type) and issubclass(c, Model)):
            raise TypeError("register_model expects a subclass of privpost.models.Model")
        key = c.name
        if not isinstance(key, str) or not re.fullmatch(r"[a-z0-9][a-z0-9\-]*", key):
            raise ValueError(f"model name must be lower case letters, digits and '-', got {key!r}")
        _load_builtin(key, unless=c)     # a user class must not silently shadow a built-in
        if key in MODELS and MODELS[key] is not c and not replace:
            raise ValueError(f"a model named {key!r} is already registered ({MODELS[key].__name__}); "
                             "pass replace=True to override it")
        MODELS[key] = c
        return c

    return deco(cls) if cls is not None else deco


def _norm_name(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


#: Built-in model name -> module (filled by :mod:`privpost.models`). The built-in models are
#: imported on first lookup, not with the package (start-up time; each imports SciPy).
BUILTIN_MODULES: dict[str, str] = {}


def _load_builtin(key: "str | None" = None, unless=None) -> None:
    """Import the module of built-in model ``key`` (all of them for ``None``)."""
    import importlib

    for k, module in list(BUILTIN_MODULES.items()):
        if (key is None or k == key) and getattr(unless, "__module__", None) != module:
            importlib.import_module(module)


def all_models() -> dict[str, type[Model]]:
    """:data:`MODELS` with every built-in model imported (``privpost.models.MODELS``)."""
    _load_builtin()
    return MODELS


def _lookup(name: str) -> type[Model]:
    key = _norm_name(name)
    if key not in MODELS:
        _load_builtin(key if key in BUILTIN_MODULES else None)
    if key not in MODELS:
        raise PrivpostError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    return MODELS[key]


def _construct(cls: type[Model], kwargs: dict) -> Model:
    sig = inspect.signature(cls.__init__)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    accepts_var = any(p.kind is p.VAR_KEYWORD for p in params)
    allowed = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not accepts_var:
        unknown = [k for k in kwargs if k not in allowed]
        if unknown:
            raise PrivpostError(
                f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                f"for model {cls.name!r}; expected: {', '.join(allowed)}")
    missing = [p.name for p in params if p.default is p.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in kwargs]
    if missing:
        raise PrivpostError(f"model {cls.name!r} needs parameter{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(repr, missing))}")
    try:
        return cls(**kwargs)
    except PrivpostError:
        raise
    except (TypeError, ValueError) as exc:
        raise PrivpostError(f"model {cls.name!r}: {exc}") from exc


def model_from_dict(d: dict) -> Model:
    """Rebuild a model from :meth:`Model.to_dict` output (dispatch on ``d["type"]``)."""
    if not isinstance(d, dict) or "type" not in d:
        raise PrivpostError("a model dict needs a 'type' key naming the model")
    return _lookup(d["type"]).from_dict(d)


def model_from_spec(spec: "str | dict | Model") -> Model:
    """Model from a CLI spec such as ``"beta-bernoulli:a=1,b=1"`` (see the module docstring).

    Also accepts a dict (``to_dict`` output), a JSON object string, or a :class:`Model` (returned
    as is). Raises :class:`~privpost.errors.PrivpostError` (a ``ValueError``) for unknown models,
    unknown or missing parameters and malformed values.
    """
    if isinstance(spec, Model):
        return spec
    if isinstance(spec, dict):
        return model_from_dict(spec)
    if not isinstance(spec, str):
        raise PrivpostError(f"model spec must be a string or dict, not {type(spec).__name__}")
    text = spec.strip()
    if text.startswith("{"):
        try:
            return model_from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise PrivpostError(f"model spec looks like JSON but does not parse: {exc}") from None
    name, _, rest = text.partition(":")
    if not name.strip():
        raise PrivpostError(f"model spec {spec!r} has no model name (expected 'name:key=value,...')")
    cls = _lookup(name)
    kwargs: dict[str, Any] = {}
    if rest.strip():
        for item in rest.split(","):
            item = item.strip()
            if not item:
                continue
            key, eq, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if not eq or not key:
                raise PrivpostError(f"model spec {spec!r}: expected key=value, got {item!r}")
            if key in kwargs:
                raise PrivpostError(f"model spec {spec!r}: parameter {key!r} given twice")
            kwargs[key] = _parse_value(value.strip(), key, spec)
    return _construct(cls, kwargs)


def _parse_scalar(tok: str, key: str, spec: str):
    low = tok.lower()
    if low in ("none", "null"):
        return None
    if low == "true":
        return True
    if low == "false":
        return False
    try:
        return int(tok)
    except ValueError:
        pass
    try:
        return float(tok)
    except ValueError:
        pass
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", tok):
        return tok
    raise PrivpostError(f"model spec {spec!r}: cannot parse value {tok!r} of {key!r}")


def _parse_value(value: str, key: str, spec: str):
    if value == "":
        raise PrivpostError(f"model spec {spec!r}: parameter {key!r} has no value")
    if "|" in value:
        rows = [[_parse_scalar(t.strip(), key, spec) for t in row.split(";")]
                for row in value.split("|")]
        if len({len(r) for r in rows}) != 1:
            raise PrivpostError(f"model spec {spec!r}: rows of {key!r} have different lengths")
        return rows
    if ";" in value:
        return [_parse_scalar(t.strip(), key, spec) for t in value.split(";") if t.strip() != ""]
    return _parse_scalar(value, key, spec)


def _format_value(v) -> str:
    v = _jsonable(v)
    if isinstance(v, list):
        if v and isinstance(v[0], list):
            if any(not isinstance(row, list) or any(isinstance(x, list) for x in row) for row in v) \
                    or len({len(row) for row in v}) != 1:
                raise PrivpostError("a nested or ragged list cannot be written in a spec string; "
                                    "use to_dict() (JSON) instead")
            return "|".join(";".join(_format_value(x) for x in row) for row in v)
        if len(v) == 1:  # a one-element vector: keep it a list when parsed back
            return _format_value(v[0]) + ";"
        return ";".join(_format_value(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v


# ---------------------------------------------------------------------- query helpers
def query_kind(query) -> str:
    """Normalised query type: ``query.name`` (or the class name) lower-cased, without ``-``/``_``.

    ``Sum`` -> ``"sum"``, ``NaiveBayesCounts`` / ``"naive-bayes-counts"`` -> ``"naivebayescounts"``.
    """
    name = getattr(query, "name", None)
    if not isinstance(name, str) or not name:
        name = type(query).__name__
    return re.sub(r"[^a-z0-9]", "", name.lower())


def query_attr(query, *names, default=None):
    """First attribute of ``query`` among ``names`` that exists and is not None."""
    for nm in names:
        v = getattr(query, nm, None)
        if v is not None:
            return v
    return default


# ---------------------------------------------------------------------- validation helpers
def positive_float(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PrivpostError(f"{name} must be a number, got {value!r}") from None
    except OverflowError:           # an integer beyond the float range
        raise PrivpostError(f"{name} must be a finite number > 0, got an integer of "
                            f"{len(str(abs(value)))} digits") from None
    if not (v > 0 and math.isfinite(v)):
        raise PrivpostError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def finite_float(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PrivpostError(f"{name} must be a number, got {value!r}") from None
    except OverflowError:           # an integer beyond the float range
        raise PrivpostError(f"{name} must be finite, got an integer of {len(str(abs(value)))} "
                            "digits") from None
    if not math.isfinite(v):
        raise PrivpostError(f"{name} must be finite, got {value!r}")
    return v


def positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise PrivpostError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if not math.isfinite(float(value)) or float(value) != int(value) or int(value) < minimum:
        raise PrivpostError(f"{name} must be an integer >= {minimum}, got {value!r}")
    from privpost.limits import get_limits

    limit = get_limits().max_dim        # sizes and loop counts of a model: bounded (issue #15)
    if int(value) > limit:
        raise PrivpostError(f"{name} = {int(value)} exceeds the limit of {limit} (max_dim, a "
                            "resource limit: raise it with privpost.limits.set_limits)")
    return int(value)


def float_array(name: str, value, shape: tuple[int, ...] | None = None, *,
                positive: bool = False) -> np.ndarray:
    """``value`` as a finite float64 array (broadcast to ``shape`` when given)."""
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise PrivpostError(f"{name} must be numeric, got {value!r}") from None
    if shape is not None:
        try:
            arr = np.array(np.broadcast_to(arr, shape), dtype=np.float64)
        except ValueError:
            raise PrivpostError(f"{name} must have shape {shape} (or broadcast to it), "
                                f"got shape {np.shape(value)}") from None
    if not np.all(np.isfinite(arr)):
        raise PrivpostError(f"{name} must be finite")
    if positive and not np.all(arr > 0):
        raise PrivpostError(f"{name} must be > 0 everywhere")
    return arr


def spd_matrix(name: str, value, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``value`` as a symmetric positive-definite ``(k, k)`` matrix and its lower Cholesky factor."""
    arr = float_array(name, value)
    if arr.ndim == 0:
        arr = arr * np.eye(k)
    elif arr.ndim == 1 and arr.shape == (k,):
        arr = np.diag(arr)
    if arr.shape != (k, k):
        raise PrivpostError(f"{name} must be a ({k}, {k}) matrix, got shape {arr.shape}")
    if not np.allclose(arr, arr.T, rtol=1e-10, atol=1e-12):
        raise PrivpostError(f"{name} must be symmetric")
    arr = 0.5 * (arr + arr.T)
    try:
        chol = np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        raise PrivpostError(f"{name} must be positive definite") from None
    return arr, chol


def as_rng(rng) -> np.random.Generator:
    """Generator from a Generator or a seed (cheap when given a Generator)."""
    return rng if isinstance(rng, np.random.Generator) else as_generator(rng)


def records_1d(model_name: str, records, *, integer: bool = False) -> np.ndarray:
    """Coerce scalar records to a finite ``(n,)`` float64 array (raise :class:`DataError`)."""
    arr = np.asarray(records)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(f"model {model_name!r} takes scalar records of shape (n,), got shape {arr.shape}")
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise DataError(f"model {model_name!r}: records must be numeric") from None
    if not np.all(np.isfinite(arr)):
        raise DataError(f"model {model_name!r}: records contain NaN or infinite values")
    if integer and not np.all(arr == np.round(arr)):
        raise DataError(f"model {model_name!r}: records must be integers")
    return arr
