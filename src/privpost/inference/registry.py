"""The method registry: every inference method declared once (issue 25, DESIGN §11).

Each :class:`Method` states its name, what it is, whether it is exact and what its posterior
conditions on or approximates, and one or more :class:`Route`\\ s. A route is a (model kinds,
release kinds) pair the method accepts, the entry point that runs it (``"module:function"``),
how the run decides its length (:class:`Length`) and the options it takes (:class:`Option`:
type, range, choices; the default is read from the entry point's signature, so it cannot drift
from the code). :func:`privpost.inference.infer` dispatches from here: it classifies the model
(:func:`model_kind`) and the release (:func:`release_kind`), picks the route, refuses unknown,
ill-typed and out-of-range options (:func:`check_options`) and only then runs the method.
``privpost methods``, ``privpost infer --help``, ``help(pp.infer)`` and the README's method table
are generated from (or tested against) this module.

The kinds are coarse families: a method may still refuse one model of a family it accepts with
its own message (e.g. gibbs-ss takes the exponential families whose CLT it knows). Type and
range checks here are never stricter than the method's own validation, which still runs.

This module imports nothing heavy (no NumPy): the CLI's help is generated from it.
"""

from __future__ import annotations

import difflib
import enum
import importlib
import inspect
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

from privpost.errors import IncompatibleError, PrivpostError

__all__ = ["ModelKind", "ReleaseKind", "Length", "Type", "Records", "Option", "Route", "Method",
           "REGISTRY", "method_spec", "model_kind", "release_kind", "route_for", "check_options",
           "option_default", "entry_point", "method_names", "help_text", "markdown_table",
           "as_json", "SIGNATURE", "readers", "until_converged", "doc_lines"]


class ModelKind(enum.Enum):
    """Model families, by class (``classes``: ``"module:Class"``; a subclass counts)."""

    HMM = ("hmm", "hidden Markov model over cells (HiddenMarkovNB)",
           ("privpost.models.hmm:HiddenMarkovNB",))
    MRF = ("mrf", "discrete Markov random field (CliqueMRF)", ("privpost.models.mrf:CliqueMRF",))
    DIRICHLET = ("dirichlet", "Dirichlet law of compositions (seed 002)",
                 ("privpost.models.dirichlet:Dirichlet",))
    REGRESSION = ("regression", "linear regression (LinearRegression)",
                  ("privpost.models.linear_regression:LinearRegression",))
    EXPFAM = ("expfam", "conjugate exponential families (beta-Bernoulli, Dirichlet-categorical, "
              "gamma-exponential/Poisson, normal, naive Bayes)",
              ("privpost.models.bernoulli:BetaBernoulli",
               "privpost.models.categorical:DirichletCategorical",
               "privpost.models.exponential:ExponentialGamma",
               "privpost.models.poisson:PoissonGamma",
               "privpost.models.normal:NormalKnownVariance",
               "privpost.models.normal:NormalInverseGamma",
               "privpost.models.naive_bayes:NaiveBayesLogLinear"))
    PENALTY = ("penalty", "penalty-MCMC model (PenaltyModel)",
               ("privpost.models.penalty_models:PenaltyModel",))
    CUSTOM = ("custom", "any other model (a user's privpost.models.Model)", ())

    def __init__(self, label: str, text: str, classes: tuple[str, ...]):
        self.label, self.text, self.classes = label, text, classes


class ReleaseKind(enum.Enum):
    """What a method reads (:func:`release_kind` classifies an object)."""

    RELEASE = ("release", "a single release")
    RELEASE_SET = ("release-set", "a release set")
    DPSS_SET = ("dpss-set", "a DPss release set")
    CELLS = ("cells", "a cell-counts release")
    CELLS_NOISY_SIZES = ("cells-noisy-sizes", "a cell-counts release with its cell sizes "
                         "released privately (a release set: privpost.releases.cells)")
    MARGINAL_TABLES = ("marginal-tables", "a marginal-tables release")
    RANDOMIZED_RESPONSE = ("randomized-response", "randomized-response reports")
    TRANSCRIPT = ("penalty-transcript", "a penalty-MCMC transcript")
    NONE = ("none", "no release (the confidential records=)")

    def __init__(self, label: str, text: str):
        self.label, self.text = label, text


class Length(enum.Enum):
    """How a run decides how many draws it makes."""

    UNTIL_CONVERGED = ("until-converged", "without draws=: rounds until split R-hat <= 1.01 and "
                       "bulk/tail ESS >= 400 or max_draws / max_seconds run out; draws=N: fixed")
    FIXED = ("fixed", "draws per chain as given (default from the signature)")
    CONJUGATE_FIXED = ("fixed-if-conjugate", "a conjugate model (model.conjugate): independent "
                       "draws, a fixed number; any other model: until converged, as "
                       "until-converged")
    PRIVACY_FIXED = ("privacy-fixed", "set by the privacy budget (each draw or iteration is paid "
                     "for in privacy)")
    OPTIMISER = ("optimiser", "a point estimate: iterates to a tolerance or an iteration cap")

    def __init__(self, label: str, text: str):
        self.label, self.text = label, text


class Records(enum.Enum):
    """Whether a route reads the confidential records (``records=``)."""

    NO = "no"
    REQUIRED = "required"


class Type(enum.Enum):
    """Types an option value may have (an option lists one or more)."""

    INT = "integer"
    NUMBER = "number"
    BOOL = "boolean"
    STR = "string"
    SEED = "seed (None, int >= 0, SeedSequence or Generator)"
    MAPPING = "mapping"
    ANY = "any value (checked by the method)"


#: An option whose default is read from the signature of its ``source`` (the route's entry
#: point unless the option names another function).
SIGNATURE = "<from the signature>"


@dataclass(frozen=True)
class Option:
    """One option of a route (a number must also be finite).

    ``types``: the accepted :class:`Type`\\ s; ``none``: None accepted; ``choices``: the
    accepted strings (for :attr:`Type.STR`); ``minimum`` / ``maximum``: bounds of a number
    (``open_minimum``: strictly above); ``default``: :data:`SIGNATURE` (read from ``source``'s
    signature, ``None`` meaning the route's entry point) or a declared value for an option the
    entry point takes through ``**options``."""

    name: str
    types: tuple[Type, ...]
    doc: str
    none: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    open_minimum: bool = False
    default: Any = SIGNATURE
    source: str | None = None

    def type_text(self) -> str:
        parts = []
        for t in self.types:
            if t is Type.STR and self.choices:
                parts.append(" | ".join(repr(c) for c in self.choices))
            else:
                parts.append(t.value)
        if self.none:
            parts.append("None")
        text = " or ".join(parts)
        if self.minimum is not None:
            text += f", {'>' if self.open_minimum else '>='} {self.minimum:g}"
        if self.maximum is not None:
            text += f", <= {self.maximum:g}"
        return text


@dataclass(frozen=True)
class Route:
    """A (model kinds, release kinds) pair a method accepts and the entry point that runs it.

    ``target``: ``"module:function"`` called as ``f(model, release, **options)``, or as
    ``f(method, model, release, **options)`` when ``takes_method``. ``models`` None: every
    model kind. ``limits``: :func:`privpost.inference.infer` checks the resource limits
    (:func:`privpost.limits.check_inference`) before calling the target; False where the target
    sizes its own latent (damcmc's count table, the HMM samplers)."""

    models: frozenset[ModelKind] | None
    releases: frozenset[ReleaseKind]
    target: str
    options: tuple[Option, ...]
    length: Length
    records: Records = Records.NO
    takes_method: bool = False
    limits: bool = True

    def accepts_model(self, kind: ModelKind) -> bool:
        return self.models is None or kind in self.models

    def option(self, name: str) -> Option | None:
        for opt in self.options:
            if opt.name == name:
                return opt
        return None


@dataclass(frozen=True)
class Method:
    """One inference method: ``name``, a one-line ``summary``, ``exact`` (its posterior is the
    exact posterior of what ``conditions_on`` says, up to Monte Carlo error) or not (then
    ``conditions_on`` says what it approximates), the ``source`` (paper) and its routes."""

    name: str
    summary: str
    exact: bool
    conditions_on: str
    source: str
    routes: tuple[Route, ...]
    run: str | None = None

    @property
    def entry(self) -> str:
        """The method's own run function (``"module:function"``; :data:`privpost.inference.
        METHODS`, for callers that run it directly): ``run`` if declared, else the target of
        its last (general) route."""
        return self.run or self.routes[-1].target

    @property
    def model_kinds(self) -> tuple[ModelKind, ...]:
        if any(r.models is None for r in self.routes):
            return tuple(ModelKind)
        return tuple(k for k in ModelKind if any(k in r.models for r in self.routes))

    @property
    def release_kinds(self) -> tuple[ReleaseKind, ...]:
        return tuple(k for k in ReleaseKind if any(k in r.releases for r in self.routes))


# ----------------------------------------------------------------------------- option blocks

def _int(name, doc, minimum=0, none=False, **kw) -> Option:
    return Option(name, (Type.INT,), doc, none=none, minimum=minimum, **kw)


def _bool(name, doc, **kw) -> Option:
    return Option(name, (Type.BOOL,), doc, **kw)


def _num(name, doc, minimum=None, none=False, open_minimum=False, **kw) -> Option:
    return Option(name, (Type.NUMBER,), doc, none=none, minimum=minimum,
                  open_minimum=open_minimum, **kw)


def _str(name, doc, choices=(), none=False, **kw) -> Option:
    return Option(name, (Type.STR,), doc, choices=tuple(choices), none=none, **kw)


SEED = Option("seed", (Type.SEED,), "random seed or Generator", none=True)
PROGRESS = _bool("progress", "show a progress bar")
MAX_DRAWS = _int("max_draws", "draw budget per chain of a run until converged", 4, none=True)
MAX_SECONDS = _num("max_seconds", "wall-time budget of a run until converged (s)", 0, none=True,
                   open_minimum=True)
RECORDS = Option("records", (Type.ANY,), "the confidential records (simulation studies)",
                 none=True)


def _sampler(draws_none=False, warmup_none=False, chains_none=False, source=None):
    return (_int("draws", "retained draws per chain" + (" (None: until converged)"
                                                       if draws_none else ""), 1,
                 none=draws_none, source=source),
            _int("warmup", "discarded warm-up iterations per chain", 0, none=warmup_none,
                 source=source),
            _int("chains", "number of chains", 1, none=chains_none, source=source))


def _damcmc_options(source=None):
    s = source
    draws, _, chains = _sampler(draws_none=True, source=s)
    return (draws, _int("warmup", "discarded warm-up iterations per chain (None: the model's "
                        "default for the release, else 1000; damcmc.default_warmup)", 0,
                        none=True, source=s), chains) + (
        Option("seed", (Type.SEED,), "random seed or Generator", none=True, source=s),
        _int("thin", "keep every thin-th draw", 1, source=s),
        _int("sweeps_per_iteration", "record sweeps per parameter update", 1, source=s),
        _bool("progress", "show a progress bar", source=s),
        _int("cores", "worker processes (None: automatic)", 1, none=True, source=s),
        Option("init", (Type.ANY,), "initial parameters or records", none=True, source=s),
        Option("proposal", (Type.ANY,), "a record proposal other than the model's", none=True,
               source=s),
        Option("fast_path", (Type.STR, Type.BOOL), "compiled record sweep", choices=("auto",),
               source=s),
        Option("interweave", (Type.STR, Type.BOOL, Type.INT), "non-centred theta move "
               "(an integer: moves per iteration)", choices=("auto",), minimum=0, source=s),
        _str("start", "chain start: near the release's mass or from the prior",
             ("data", "prior"), source=s),
        _int("max_draws", MAX_DRAWS.doc, 4, none=True, source=s),
        _num("max_seconds", MAX_SECONDS.doc, 0, none=True, open_minimum=True, source=s),
        _str("latent", "what is imputed: the count table when one exists, or the records",
             ("auto", "counts", "records"), source=s))


def _hmm_options(method: str) -> tuple[Option, ...]:
    """The HMM samplers' options (one entry point for the four methods, so one list: the
    entry point refuses the damcmc-only ones for the others, naming them)."""
    opts = _sampler(draws_none=True, warmup_none=True, chains_none=True) + (
        SEED, PROGRESS,
        Option("heldout", (Type.ANY,), "held-out cells for predictive scoring", none=True),
        _bool("keep_counts", "keep the imputed counts in the result"),
        _int("max_draws", MAX_DRAWS.doc, 4, none=True),
        MAX_SECONDS,
        Option("relabel", (Type.STR, Type.BOOL), "relabelling of the symmetric states",
               choices=("draws", "chains"), none=True),
        _str("z_sampler", "state-sequence update", ("collapsed", "ffbs", "marginal")),
        _int("split_merge", "split-merge moves of the states per iteration", 0, none=True),
        _num("near_shift", "damcmc: weight of the near-state proposal of the state-shift moves",
             0, none=True),
        Option("collapsed_shift", (Type.BOOL,), "damcmc: state shifts with theta integrated out",
               none=True))
    opts += (_int("record_sweeps", "damcmc: sweeps over the latent reports", 1, none=True),
             _str("latent", "damcmc: count-level (default) or record-level latent",
                  ("auto", "counts", "records")),
             _int("count_sweeps", "damcmc: count-table sweeps per iteration", 1, none=True),
             _bool("count_shift", "damcmc: the count-table shift move"),
             RECORDS,
             _num("epsilon", "ops: privacy parameter", 0, none=True, open_minimum=True),
             _num("M", "ops: truncation of the emission log-likelihood", 0, open_minimum=True),
             _str("keep", "ops: which state is released", ("last", "all")),
             _bool("diagnose", "convergence diagnostics of the chains"),
             _str("size_prior", "damcmc, cell sizes released privately: prior of each latent "
                  "cell size N[r,t] (flat, or Poisson(size_rate))", ("flat", "poisson")),
             _num("size_rate", "damcmc, size_prior='poisson': the Poisson mean of a cell size",
                  0, none=True, open_minimum=True),
             _str("size_total", "damcmc, private cell sizes: 'fixed' (conditioned on the "
                  "published n = sum N) or 'free' (the latent sizes' sum not tied to n)",
                  ("free", "fixed")))
    return opts


def _hmm_route(method: str, records: Records = Records.NO) -> Route:
    kinds = {ReleaseKind.CELLS} | ({ReleaseKind.CELLS_NOISY_SIZES} if method == "damcmc"
                                   else set())
    return Route(frozenset({ModelKind.HMM}), frozenset(kinds),
                 "privpost.inference.hmm:run_method", _hmm_options(method),
                 Length.FIXED if method == "ops" else Length.UNTIL_CONVERGED, records,
                 takes_method=True, limits=False)


_MRF_ROUTE = (frozenset({ModelKind.MRF}), frozenset({ReleaseKind.MARGINAL_TABLES}))
_RIDGE = _num("ridge", "ridge penalty lambda", 0, none=True)
_PROJECT = _bool("project", "project the noisy marginals onto the simplex")
_NOT_HMM = frozenset(ModelKind) - {ModelKind.HMM, ModelKind.PENALTY}
_SEED002 = "Guo, Barrientos & Pena (seed 002)"
_DPSS = frozenset({ReleaseKind.DPSS_SET})
_DIR = frozenset({ModelKind.DIRICHLET})
_PRIOR = _str("prior", "prior on alpha (seed 002, Table 1)", ("p1", "p2", "p3", "p4", "p5"))
_PRIOR_DRAWS = _int("prior_draws", "draws that build the empirical priors p3-p5", 1)
_DAMCMC = "privpost.inference.damcmc:run"


def _dpss_route(target, options, length) -> Route:
    return Route(_DIR, _DPSS, target, options, length)


REGISTRY: tuple[Method, ...] = (
    Method("damcmc", "data augmentation MCMC: imputes the confidential records (compiled "
           "record sweeps); for counts (a 0/1 `Sum`/`Mean`, a `Histogram`, a set of releases "
           "of one table, marginal tables, HMM cells) the true count table instead, at a cost "
           "independent of n (`docs/census_scale.md`; `latent=\"records\"` keeps the records)",
           True,
           "the whole release (any record-additive mechanism); release sets: every release; "
           "HMM cells with noisy sizes: the noisy counts, the noisy sizes and n (size_total)",
           "Ju, Awan, Gong & Rao (seed 000); Foulds et al. (seed 004) for the HMM",
           (_hmm_route("damcmc"),
            Route(_NOT_HMM, frozenset({ReleaseKind.RELEASE, ReleaseKind.RELEASE_SET,
                                       ReleaseKind.MARGINAL_TABLES}),
                  "privpost.inference._damcmc_route:run", _damcmc_options(_DAMCMC),
                  Length.UNTIL_CONVERGED, limits=False)), run=_DAMCMC),
    Method("gibbs-ss", "sufficient-statistic Gibbs: CLT for the statistic, Laplace noise as a "
           "normal scale mixture; cost independent of n", False,
           "approximates the release's likelihood by the statistic's CLT normal",
           "Bernstein & Sheldon (seed 003)",
           (Route(frozenset({ModelKind.EXPFAM}), frozenset({ReleaseKind.RELEASE}),
                  "privpost.inference.gibbs_ss:run", _sampler() + (SEED, PROGRESS),
                  Length.FIXED),
            Route(frozenset({ModelKind.REGRESSION}),
                  frozenset({ReleaseKind.RELEASE, ReleaseKind.RELEASE_SET}),
                  "privpost.inference.gibbs_ss:run", _sampler() + (
                      SEED, PROGRESS,
                      _str("covariate_moments", "source of the covariate moments",
                           ("prior", "update", "noisy"), none=True,
                           source="privpost.inference._gibbs_regression:run"),
                      _int("max_tries", "rejection attempts for a PSD statistic", 1,
                           source="privpost.inference._gibbs_regression:run"),
                      _bool("collapsed", "add the collapsed Metropolis step",
                            source="privpost.inference._gibbs_regression:run")),
                  Length.FIXED))),
    Method("naive", "plug the noisy statistic into the conjugate update (projections in the "
           "notes); MRF: the noise-naive MLE; HMM cells: `docs/hmm.md`", False,
           "ignores the privacy noise (a baseline)", "Foulds et al. (seed 004)",
           (_hmm_route("naive"),
            Route(*_MRF_ROUTE, "privpost.inference.mrf_methods:run_naive",
                  (_RIDGE, _PROJECT, SEED, PROGRESS) + _sampler(True, True, True), Length.FIXED),
            Route(frozenset({ModelKind.EXPFAM, ModelKind.REGRESSION}),
                  frozenset({ReleaseKind.RELEASE, ReleaseKind.RANDOMIZED_RESPONSE}),
                  "privpost.inference.naive:run", _sampler() + (SEED, PROGRESS),
                  Length.FIXED))),
    Method("nonprivate", "the posterior given the confidential records (simulation studies)",
           True, "the confidential records, not a release", "-",
           (_hmm_route("nonprivate", Records.REQUIRED),
            Route(_NOT_HMM - {ModelKind.CUSTOM},
                  frozenset({ReleaseKind.NONE, ReleaseKind.RELEASE,
                             ReleaseKind.MARGINAL_TABLES, ReleaseKind.RANDOMIZED_RESPONSE}),
                  "privpost.inference.nonprivate:run",
                  (RECORDS,) + _sampler(True, True) + (
                      SEED, PROGRESS,
                      _bool("clamp", "clamp the records to the release's bounds first"),
                      MAX_DRAWS, MAX_SECONDS),
                  Length.CONJUGATE_FIXED, Records.REQUIRED))),
    Method("ops", "one-posterior-sample mechanism: a private release of posterior draws, run "
           "by the data holder", False,
           "not a posterior of a release: private draws from the records' posterior",
           "Foulds et al. (seed 004)",
           (_hmm_route("ops", Records.REQUIRED),
            Route(frozenset({ModelKind.EXPFAM}), frozenset({ReleaseKind.NONE,
                                                            ReleaseKind.RELEASE}),
                  "privpost.inference.ops:run",
                  (RECORDS, _num("epsilon", "OPS privacy parameter", 0, none=True,
                                 open_minimum=True),
                   _int("draws", "released posterior samples per chain", 1),
                   _int("chains", "number of chains", 1), SEED, PROGRESS,
                   Option("a0", (Type.NUMBER, Type.ANY), "prior tempering", none=True),
                   Option("param_bounds", (Type.ANY,), "parameter bounds", none=True),
                   Option("data_bounds", (Type.ANY,), "record bounds", none=True),
                   _bool("temper_prior", "temper the prior as well"),
                   _int("warmup", "accepted and ignored (OPS draws are exact)", 0, none=True,
                        default=None)),
                  Length.PRIVACY_FIXED, Records.REQUIRED))),
    Method("randomized-response", "exact posterior of category probabilities from "
           "randomized-response reports", True, "the reports (the whole release)",
           "Warner; seed 004",
           (Route(frozenset({ModelKind.EXPFAM}), frozenset({ReleaseKind.RANDOMIZED_RESPONSE}),
                  "privpost.inference.rr:run",
                  _sampler(draws_none=True) + (SEED, PROGRESS, MAX_DRAWS, MAX_SECONDS),
                  Length.UNTIL_CONVERGED),)),
    Method("cgm-em", "EM with non-linear belief propagation on noisy marginal tables "
           "(a point estimate; `docs/graphical_models.md`)", False,
           "a point estimate (CGM moment matching)", "Bernstein & Sheldon (seed 003, ch. 3)",
           (Route(*_MRF_ROUTE, "privpost.inference.mrf_methods:run_cgm_em",
                  (_RIDGE,
                   _num("alpha", "damping of the belief-propagation updates", 0,
                        open_minimum=True, maximum=1),
                   _num("tol", "belief-propagation tolerance", 0, open_minimum=True),
                   _int("max_nlbp", "belief-propagation iterations", 1),
                   _num("huber", "Huber threshold", 0, open_minimum=True),
                   _num("em_tol", "EM tolerance", 0, open_minimum=True),
                   _int("max_em", "EM iterations", 1), _PROJECT,
                   SEED, PROGRESS) + _sampler(True, True, True),
                  Length.OPTIMISER),)),
    Method("mrf-laplace", "Laplace approximation of the MRF posterior from noisy marginal "
           "tables (`docs/graphical_models.md`)", False,
           "a normal approximation at the posterior mode", "Bernstein & Sheldon (seed 003, ch. 3)",
           (Route(*_MRF_ROUTE, "privpost.inference.mrf_methods:run_laplace",
                  _sampler(warmup_none=True) + (
                      SEED, _RIDGE, PROGRESS),
                  Length.FIXED),)),
    Method("penalty-mcmc", "penalty MCMC: the curator's Metropolis chain sees log-likelihood "
           "ratios through Gaussian noise; `pp.penalty_mcmc` / `privpost penalty` publish the "
           "transcript with exact GDP accounting (`docs/penalty_mcmc.md`); this method reads "
           "it: its states are the draws", True,
           "the confidential records: draws of the non-private posterior "
           "(the transcript is the private release); few iterations per budget",
           "Yildirim (seed 001)",
           # the model the transcript ran with: a penalty model, or an expfam model that
           # converts to it (models.penalty_models.penalty_model; a spec string is "custom")
           (Route(frozenset({ModelKind.EXPFAM, ModelKind.PENALTY, ModelKind.CUSTOM}),
                  frozenset({ReleaseKind.TRANSCRIPT}), "privpost.inference.penalty:run",
                  (_int("warmup", "transcript states discarded", 0, none=True), SEED, PROGRESS),
                  Length.PRIVACY_FIXED),)),
    Method("dpboots", "parametric bootstrap on a DPss release", False,
           "a bootstrap of the noisy statistic", _SEED002,
           (_dpss_route("privpost.inference.compositional:run_dpboots",
                        (_str("prior", "prior (unused; refused unless None)", ("p1", "p2", "p3",
                                                                              "p4", "p5"),
                              none=True),) + _sampler(warmup_none=True) + (SEED, PROGRESS),
                        Length.FIXED),)),
    Method("dpmcmc", "DA-MCMC on the censored mean-log statistic of a DPss release, priors "
           "p1-p5 (`docs/compositional.md`)", True,
           "the censored mean-log statistic of the release (not its score)", _SEED002,
           (_dpss_route("privpost.inference.compositional:run_dpmcmc",
                        (_PRIOR, Option("seed", (Type.SEED,), "random seed or Generator",
                                        none=True), _PRIOR_DRAWS)
                        + tuple(o for o in _damcmc_options(_DAMCMC) if o.name != "seed"),
                        Length.UNTIL_CONVERGED),)),
    Method("dpremcmc", "DA-MCMC with the score's rejection step (model (5))", False,
           "model (5): the release with the score's rejection term, not the DPss posterior",
           _SEED002,
           (_dpss_route("privpost.inference.compositional:run_dpremcmc",
                        (_PRIOR, _int("b", "rejection blocks", 1), SEED, _PRIOR_DRAWS,
                         _str("support", "support of the statistic", ("uncensored", "all")),
                         _bool("weight_term", "the score's weight term"))
                        # damcmc's options but its own proposal (model (5)'s, chosen by
                        # weight_term): a proposal= reached damcmc twice (TypeError)
                        + tuple(o for o in _damcmc_options(_DAMCMC)
                                if o.name not in ("seed", "proposal")),
                        Length.UNTIL_CONVERGED),)),
    Method("dpabc", "approximate Bayesian computation on a DPss release", False,
           "ABC: a tolerance around the noisy statistic", _SEED002,
           (_dpss_route("privpost.inference.compositional:run_dpabc",
                        (_PRIOR,) + _sampler(warmup_none=True) + (
                            _int("proposals_per_draw", "ABC proposals per draw", 1),
                            SEED, PROGRESS, _PRIOR_DRAWS,
                            Option("p5_options", (Type.MAPPING,), "options of p5's chains",
                                   none=True)),
                        Length.FIXED),)),
    Method("dpapprox", "MCMC on a normal approximation of the statistic's law", False,
           "a normal approximation of the censored mean-log statistic's law", _SEED002,
           (_dpss_route("privpost.inference.compositional_approx:run_dpapprox",
                        (_PRIOR,) + _sampler(draws_none=True) + (
                            _int("mh_steps", "Metropolis steps per iteration", 1),
                            SEED, PROGRESS, _PRIOR_DRAWS, MAX_DRAWS, MAX_SECONDS),
                        Length.UNTIL_CONVERGED),)),
    Method("boots", "non-private bootstrap of the records' MLE (baseline)", False,
           "the confidential records (a bootstrap, not a posterior)", _SEED002,
           (Route(_DIR, frozenset({ReleaseKind.NONE}),
                  "privpost.inference.compositional:run_boots",
                  (RECORDS,) + _sampler(warmup_none=True) + (
                      SEED, PROGRESS, _str("prior", "prior (unused; refused unless None)",
                                           ("p1", "p2", "p3", "p4", "p5"), none=True)),
                  Length.FIXED, Records.REQUIRED),)),
)

_BY_NAME = {m.name: m for m in REGISTRY}


def method_names() -> tuple[str, ...]:
    """The registered names, in registry order."""
    return tuple(_BY_NAME)


def method_spec(name) -> Method:
    """The :class:`Method` called ``name`` (:class:`IncompatibleError` listing them if none)."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise IncompatibleError(
            f"unknown method {name!r}; available: {', '.join(sorted(_BY_NAME))}") from None


# ----------------------------------------------------------------------------- classification

def _is_instance(obj, path: str) -> bool:
    """``isinstance(obj, Class)`` for ``path = "module:Class"`` without importing the module
    (an object cannot be an instance of a class whose module was never imported)."""
    module, cls = path.split(":")
    mod = sys.modules.get(module)
    return mod is not None and isinstance(obj, getattr(mod, cls, ()))


def model_kind(model) -> ModelKind:
    """The :class:`ModelKind` of ``model`` (:attr:`ModelKind.CUSTOM` if no family claims it)."""
    for kind in ModelKind:
        if any(_is_instance(model, c) for c in kind.classes):
            return kind
    return ModelKind.CUSTOM


def release_kind(release) -> ReleaseKind:
    """The :class:`ReleaseKind` of ``release`` (anything unrecognised: :attr:`RELEASE`, left
    to the method's own checks)."""
    if release is None:
        return ReleaseKind.NONE
    if _is_instance(release, "privpost.inference.penalty:PenaltyRelease"):
        return ReleaseKind.TRANSCRIPT
    if _is_instance(release, "privpost.releases.release:ReleaseSet"):
        rels = release.releases
        if any(_noisy_sizes_part(r) for r in rels):
            return ReleaseKind.CELLS_NOISY_SIZES
        if rels and all(isinstance(getattr(r, "metadata", None), dict)
                        and "dpss" in r.metadata for r in rels):
            return ReleaseKind.DPSS_SET
        return ReleaseKind.RELEASE_SET
    if _is_instance(getattr(release, "query", None), "privpost.queries.cell_counts:CellCounts"):
        return ReleaseKind.CELLS
    if _is_instance(getattr(release, "query", None), "privpost.queries.marginal_tables:MarginalTables"):
        return ReleaseKind.MARGINAL_TABLES
    if getattr(getattr(release, "mechanism", None), "name", None) == "randomized_response":
        return ReleaseKind.RANDOMIZED_RESPONSE
    return ReleaseKind.RELEASE


#: why each HMM method other than damcmc refuses cells with noisy sizes (route_for's message)
_NOISY_SIZES_WHY = {
    "naive": "it plugs the noisy counts in as exact counts of cells of known, exact sizes",
    "nonprivate": "it is the posterior given the confidential records, a simulation-study "
                  "baseline for releases whose cell sizes are public",
    "ops": "its privacy derivation takes each report's cell as public (the exact cell "
           "sizes), which this release protects",
}


def _noisy_sizes_part(rel) -> bool:
    """A part of a cells release with private sizes (:mod:`privpost.releases.cells`): a
    cell-sizes release, or cell counts whose sizes are withheld."""
    query = getattr(rel, "query", None)
    name = getattr(query, "name", None)
    return name == "cell_sizes" or (name == "cell_counts"
                                    and getattr(query, "sizes_public", True) is False)


def readers(kind: ReleaseKind) -> tuple[str, ...]:
    """The methods that read releases of ``kind``."""
    return tuple(m.name for m in REGISTRY if kind in m.release_kinds)


def _set_refusal(method: str, release) -> str:
    kinds = ", ".join(f"[{i}] {getattr(getattr(r, 'query', None), 'name', type(r).__name__)}"
                      for i, r in enumerate(getattr(release, "releases", ())))
    sets = [m for m in readers(ReleaseKind.RELEASE_SET) if m != "damcmc"]
    return (f"method {method!r} takes a single Release, not a ReleaseSet (this one holds "
            f"{kinds}); only {', '.join(sets)} reads a release set (LinearRegression with "
            "covariate_moments='noisy': a RegressionStats and a CovariateMoments release of "
            "the same records), damcmc a set whose releases each fit the model, and "
            f"{', '.join(readers(ReleaseKind.DPSS_SET))} a DPss set. Pass one of the set's "
            "releases, e.g. release_set.releases[0]")


def route_for(spec: Method, model, release) -> Route:
    """The route of ``spec`` for this (model, release) pair; :class:`IncompatibleError` saying
    what the method accepts and which methods read this kind of release otherwise."""
    mk, rk = model_kind(model), release_kind(release)
    by_model = [r for r in spec.routes if r.accepts_model(mk)]
    for route in by_model:
        if rk in route.releases:
            return route
    name = spec.name
    if rk is ReleaseKind.TRANSCRIPT:
        raise IncompatibleError(f"a penalty-MCMC transcript is read by method "
                                f"{' / '.join(map(repr, readers(rk)))} only (its draws are "
                                f"the chain's states), not {name!r}")
    if rk is ReleaseKind.CELLS_NOISY_SIZES and mk is ModelKind.HMM:
        why = _NOISY_SIZES_WHY.get(name, "it has no model of noisy cell sizes")
        raise IncompatibleError(
            f"method {name!r} cannot read cell counts whose cell sizes are released with "
            f"noise: {why}; use method 'damcmc' (count latent, the default), which imputes the "
            "cell sizes and is exact given the noisy counts and the noisy sizes")
    if rk in (ReleaseKind.RELEASE_SET, ReleaseKind.DPSS_SET) and not any(
            k in r.releases for r in spec.routes
            for k in (ReleaseKind.RELEASE_SET, ReleaseKind.DPSS_SET)):
        raise IncompatibleError(_set_refusal(name, release))
    if not by_model:
        takes = "; ".join(k.text for k in spec.model_kinds)
        others = [m.name for m in REGISTRY if mk in m.model_kinds]
        raise IncompatibleError(
            f"method {name!r} is not available for the {mk.label} model "
            f"({type(model).__name__}); it takes: {takes}. Methods for this model: "
            f"{', '.join(others) or 'none'}")
    reads = " or ".join(k.text for r in by_model for k in sorted(r.releases, key=_order))
    raise IncompatibleError(
        f"method {name!r} reads {reads} (for a model of kind {mk.label!r}), not {rk.text}; "
        f"{rk.text} {'are' if rk is ReleaseKind.RANDOMIZED_RESPONSE else 'is'} read by "
        f"{', '.join(readers(rk)) or 'no method'}")


def _order(kind) -> int:
    return list(type(kind)).index(kind)


# ----------------------------------------------------------------------------- options

def entry_point(route: Route) -> Callable[..., Any]:
    module, func = route.target.split(":")
    return getattr(importlib.import_module(module), func)


def _signature_default(path: str, name: str):
    module, func = path.split(":")
    fn = getattr(importlib.import_module(module), func)
    param = inspect.signature(fn).parameters.get(name)
    if param is None or param.default is inspect.Parameter.empty:
        raise LookupError(f"{path} has no keyword parameter {name!r} with a default")
    return param.default


def option_default(route: Route, option: Option):
    """The default of ``option`` on ``route``: read from its source's signature (the route's
    entry point unless the option names another function), or the declared value."""
    if option.default is not SIGNATURE:
        return option.default
    return _signature_default(option.source or route.target, option.name)


def _is_int(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.integer)


def _is_number(v) -> bool:
    if _is_int(v):
        return True
    if isinstance(v, float):
        return True
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.floating)


def _type_ok(opt: Option, value) -> bool:
    if value is None:
        return opt.none
    for t in opt.types:
        if t is Type.ANY:
            return True
        if t is Type.BOOL and isinstance(value, bool):
            return True
        if t is Type.INT and _is_int(value):
            return True
        if t is Type.NUMBER and _is_number(value):
            return True
        if t is Type.STR and isinstance(value, str) and (not opt.choices
                                                         or value in opt.choices):
            return True
        if t is Type.MAPPING and isinstance(value, dict):
            return True
        if t is Type.SEED:
            if _is_int(value) or not isinstance(value, (bool, str, float, bytes)):
                return True         # Generator, SeedSequence, ...: the method's _rng checks
    return False


def _range_ok(opt: Option, value) -> bool:
    if not _is_number(value):
        return True
    v = float(value)
    if not math.isfinite(v):            # no option takes NaN or an infinity
        return False
    if opt.minimum is not None and (v < opt.minimum or (opt.open_minimum
                                                        and v == opt.minimum)):
        return False
    return opt.maximum is None or v <= opt.maximum


def check_options(spec: Method, route: Route, options: dict) -> None:
    """Refuse, before anything runs, an option ``route`` does not take (naming the closest
    valid one and listing them all) and a value of the wrong type or out of range (naming
    the option, its type and range, and the valid options): :class:`IncompatibleError` /
    :class:`PrivpostError`, never a ``TypeError``."""
    valid = sorted(o.name for o in route.options)
    listing = ", ".join(valid)
    unknown = [str(k)[:80] for k in options
               if not isinstance(k, str) or route.option(k) is None]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise IncompatibleError(f"method {spec.name!r} has no option {key!r}{hint}; its "
                                f"options: {listing} (unexpected option(s): "
                                f"{', '.join(unknown[:10])})")
    for key, value in options.items():
        opt = route.option(key)
        if opt.name == "seed":
            if not _type_ok(opt, value):
                raise PrivpostError(f"option 'seed' of method {spec.name!r} must be "
                                    f"{opt.type_text()}, got {_short(value)}; its options: "
                                    f"{listing}")
            continue
        if not (_type_ok(opt, value) and _range_ok(opt, value)):
            raise PrivpostError(f"option {key!r} of method {spec.name!r} must be "
                                f"{opt.type_text()}, got {_short(value)}; its options: "
                                f"{listing}")


def _short(value) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


# ----------------------------------------------------------------------------- listings

def help_text() -> str:
    """The method list of ``privpost infer --help``: every name, exact or approximate."""
    return "; ".join(f"{m.name} ({'exact' if m.exact else 'approximate'})" for m in REGISTRY)


def until_converged() -> str:
    """The methods (qualified by model where only some of their routes do) whose runs without
    ``draws=`` go on until converged: ``privpost infer --draws``'s help."""
    parts = []
    for m in REGISTRY:
        if all(r.length is Length.UNTIL_CONVERGED for r in m.routes):
            parts.append(m.name)
            continue
        quals = []
        for r in m.routes:
            if r.length is Length.UNTIL_CONVERGED:
                quals.append(", ".join(k.label for k in ModelKind if r.accepts_model(k))
                             + " models")
            elif r.length is Length.CONJUGATE_FIXED:
                quals.append("non-conjugate models")
        if quals:
            parts.append(f"{m.name} ({'; '.join(quals)})")
    return ", ".join(parts)


def doc_lines(indent: str = "        ") -> str:
    """The method list of ``help(pp.infer)``: one entry per method (name, exact or not,
    summary, model and release kinds)."""
    import textwrap

    lines = []
    for m in REGISTRY:
        lines.append(textwrap.fill(
            f"``{m.name}`` ({'exact' if m.exact else 'approximate'}): {m.summary}. Models: "
            f"{_models_text(m)}; releases: {_releases_text(m)}.", width=96,
            initial_indent=indent, subsequent_indent=indent + "    ",
            break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)


def _models_text(m: Method) -> str:
    return ", ".join(k.label for k in m.model_kinds)


def _releases_text(m: Method) -> str:
    return ", ".join(k.label for k in m.release_kinds)


def markdown_table() -> str:
    """The README's method table (between ``<!-- methods -->`` markers)."""
    rows = ["| method | what it is | exact? | models | releases | length |",
            "|---|---|---|---|---|---|"]
    for m in REGISTRY:
        exact = ("yes" if m.exact else "no") + f": {m.conditions_on}"
        length = ", ".join(dict.fromkeys(r.length.label for r in m.routes))
        rows.append(f"| `{m.name}` | {m.summary} ({m.source}) | {exact} | {_models_text(m)} "
                    f"| {_releases_text(m)} | {length} |")
    return "\n".join(rows)


def as_json(defaults: bool = True) -> list[dict]:
    """The registry as JSON-ready dicts (``privpost methods --json``). ``defaults``: read each
    option's default from the code (imports every method module)."""
    out = []
    for m in REGISTRY:
        routes = []
        for r in m.routes:
            opts = []
            for o in r.options:
                d = {"name": o.name, "type": o.type_text(), "doc": o.doc}
                if defaults:
                    d["default"] = _jsonable(option_default(r, o))
                opts.append(d)
            routes.append({"models": [k.label for k in (r.models or ModelKind)
                                      if r.accepts_model(k)],
                           "releases": [k.label for k in sorted(r.releases, key=_order)],
                           "records": r.records.value, "length": r.length.label,
                           "target": r.target, "options": opts})
        out.append({"name": m.name, "summary": m.summary, "exact": m.exact,
                    "conditions_on": m.conditions_on, "source": m.source,
                    "models": [k.label for k in m.model_kinds],
                    "releases": [k.label for k in m.release_kinds], "routes": routes})
    return out


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)
