"""Completing a model spec from the release it will be fitted to.

A release fixes some of a model's structural sizes: a histogram's number of categories is the
Dirichlet--categorical ``k``; a regression release's number of predictors is the regression's
``p``; naive-Bayes tables fix ``n_classes`` (I) and ``n_levels`` (J_k); a censored log-mean fixes
the Dirichlet model's ``parts``; a cell-count release fixes the HMM's ``n_levels`` (one feature's ``n_levels=2`` is read as the list ``2;``); marginal
tables fix the MRF's ``levels`` and (by default) its ``cliques``, which may also be given by
column name (``cliques=smoke;cough|cough;age``); a regression whose ``covariates=`` declares
uniform or categorical columns gets ``covariate_bounds`` from the release's ``bounds_x``.
:func:`model_for_release` fills in what the spec leaves out and
returns what it filled in, so the CLI can print it::

    >>> model, inferred = model_for_release("dirichlet-categorical:alpha=1", release)
    >>> inferred
    {'k': 4}

Values the spec states are kept as given (a mismatch is then reported by the model's own
``check_query``).
"""

from __future__ import annotations

import re
from typing import Any

from privpost.errors import PrivpostError

__all__ = ["complete_spec", "model_for_release"]


def _first_query(release):
    from privpost.releases.release import ReleaseSet

    if isinstance(release, ReleaseSet):
        return release.releases[0].query
    return getattr(release, "query", None)      # a penalty-MCMC transcript has no query


def _spec_keys(rest: str) -> dict[str, str]:
    keys = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if eq and key.strip():
            keys[key.strip().replace("-", "_")] = value.strip()
    return keys


def _inferable(model_name: str, given: dict[str, str], query) -> dict[str, Any]:
    """Structural sizes of ``model_name`` fixed by ``query`` and missing from ``given``."""
    qname = getattr(query, "name", "")
    out: dict[str, Any] = {}
    if model_name == "dirichlet-categorical" and qname == "histogram":
        if "k" not in given and ";" not in given.get("alpha", ""):
            out["k"] = int(query.categories)
    elif model_name == "linear-regression" and qname in ("regression_stats", "covariate_moments"):
        if "p" not in given:
            out["p"] = len(query.bounds_x)
        # uniform / categorical covariates live on the release's bounds (issue 23)
        kinds = given.get("covariates", "").lower()
        if ("uniform" in kinds or "categorical" in kinds) and "covariate_bounds" not in given:
            out["covariate_bounds"] = [[float(a), float(b)] for a, b in query.bounds_x]
    elif model_name == "naive-bayes" and qname == "naive_bayes_counts":
        if "n_classes" not in given and ";" not in given.get("class_alpha", ""):
            out["n_classes"] = int(query.n_classes)
        if "n_levels" not in given:
            out["n_levels"] = [int(j) for j in query.n_levels]
        elif ";" not in given["n_levels"] and "n_features" not in given:
            out["n_features"] = len(query.n_levels)
    elif model_name == "hmm" and qname == "cell_counts":
        if "n_levels" not in given:
            out["n_levels"] = [int(j) for j in query.n_levels]
    elif model_name == "mrf" and qname == "marginal_tables":
        if "levels" not in given:
            out["levels"] = [int(j) for j in query.levels]
        if "cliques" not in given:
            out["cliques"] = [[int(v) for v in c] for c in query.cliques]
    elif model_name == "dirichlet" and qname == "censored_log_mean":
        if "parts" not in given:
            out["parts"] = int(query.parts)
    return out


def _named_cliques(model_name: str, given: dict[str, str], query, spec: str):
    """The MRF ``cliques`` of the spec with column names replaced by indices (None when the
    spec has no clique given by name). Names are the marginal-tables release's ``columns``."""
    if model_name != "mrf" or "cliques" not in given:
        return None
    rows = [[t.strip() for t in row.split(";") if t.strip()] for row in given["cliques"].split("|")]
    if all(t.isdigit() for row in rows for t in row):
        return None
    columns = list(getattr(query, "columns", ()) or ())
    out = []
    for row in rows:
        idx = []
        for t in row:
            if t.isdigit():
                idx.append(int(t))
            elif t in columns:
                idx.append(columns.index(t))
            else:
                raise PrivpostError(f"model spec {spec!r}: cliques names {t!r}, which is not a "
                                    f"column of the release ({', '.join(columns) or 'none'})")
        out.append(idx)
    return out


def complete_spec(spec: str, release) -> tuple[str, dict[str, Any]]:
    """``spec`` with the sizes the release determines appended, and those sizes.

    Parameters
    ----------
    spec : str
        CLI model spec ``"name:key=value,..."`` (JSON specs and dicts are returned unchanged).
    release : privpost.Release or privpost.ReleaseSet

    Returns
    -------
    (str, dict)
        The completed spec and ``{parameter: inferred value}`` (empty if nothing was inferred).
    """
    if not isinstance(spec, str) or spec.strip().startswith("{"):
        return spec, {}
    from privpost.models.base import _norm_name

    name, _, rest = spec.strip().partition(":")
    if _norm_name(name) == "hmm":   # one feature: n_levels=2 means the list [2] ('2;')
        rest = ",".join(re.sub(r"^(\s*n[_-]levels\s*=\s*\d+)\s*$", r"\1;", item)
                        for item in rest.split(","))
        spec = f"{name}:{rest}"
    given = _spec_keys(rest)
    query = _first_query(release)
    inferred = _inferable(_norm_name(name), given, query)
    named = _named_cliques(_norm_name(name), given, query, spec)
    if not inferred and named is None:
        return spec, {}
    if named is not None or any(isinstance(v, list) and v and isinstance(v[0], list)
                                for v in inferred.values()):
        # nested lists (cliques, maybe of unequal sizes): a JSON spec says them exactly
        import json

        from privpost.models.base import _parse_value

        items = [item.strip() for item in rest.split(",") if item.strip()]
        bad = [item for item in items if "=" not in item]
        if bad:
            raise PrivpostError(f"model spec {spec!r}: expected key=value, got {bad[0]!r}")
        kwargs = {k: _parse_value(v, k, spec) for k, v in given.items()}
        if named is not None:
            kwargs["cliques"] = named
        kwargs.update(inferred)
        return json.dumps({"type": _norm_name(name), **kwargs}), inferred
    def fmt(v):   # a list is 'a;b;c' in a spec; a one-element list needs the trailing ';'
        if isinstance(v, list):
            return ";".join(map(str, v)) + (";" if len(v) == 1 else "")
        return str(v)

    extra = ",".join(f"{k}={fmt(v)}" for k, v in inferred.items())
    sep = "," if rest.strip() else ""
    return f"{name.strip()}:{rest.strip()}{sep}{extra}", inferred


def model_for_release(spec, release):
    """The model of ``spec`` with sizes the release determines filled in.

    Returns ``(model, inferred)``; ``inferred`` maps each filled-in parameter to its value.
    Raises :class:`~privpost.errors.PrivpostError` for a bad spec.
    """
    from privpost.models.base import model_from_spec

    full, inferred = complete_spec(spec, release)
    try:
        return model_from_spec(full), inferred
    except PrivpostError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise PrivpostError(f"--model: {exc}") from None
