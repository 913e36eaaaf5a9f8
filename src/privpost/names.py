"""Names of a posterior's parameter axes, taken from the release they were fitted to.

A release carries public names: a histogram's category ``levels``, a query's ``columns``
(regression covariates, marginal-table variables), a cell-count release's region and time codes
and level names (``metadata``), a naive-Bayes release's class and feature columns, a
compositional release's parts (the Dirichlet's ``alpha``). :func:`axis_names` turns them into
one description per parameter axis, ``(dim, values, keyed)``, which :class:`privpost.posterior.Posterior` uses everywhere it
shows a parameter entry: the summary labels (``p[north]`` instead of ``p[0]``), ``--json``, the
ArviZ dimensions and coordinates of :meth:`~privpost.posterior.Posterior.to_datatree` and of the
netCDF file, and the plots. ``keyed`` says whether a label shows the dimension too
(``theta0[smoke=1, cough=0]``, for MRF tables whose axes are variables with coded levels).

Only what the release states is used; an axis without a public name keeps ArviZ's default
(``NAME_dim_i``, coordinates ``0..size-1``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["axis_names", "entry_label", "named_text", "release_query", "release_metadata"]

Axis = tuple[str, list, bool]


def _first_field(release: dict | None, key: str) -> dict:
    """Field ``key`` (a dict) of a release document, or of a release set's first release
    (``{}`` if none)."""
    if not isinstance(release, dict):
        return {}
    if isinstance(release.get("releases"), list) and release["releases"]:
        release = release["releases"][0]
    v = release.get(key) if isinstance(release, dict) else None
    return v if isinstance(v, dict) else {}


def release_query(release: dict | None) -> dict:
    """The (first) query description of a release or release-set document (``{}`` if none)."""
    return _first_field(release, "query")


def release_metadata(release: dict | None) -> dict:
    """The (first) metadata of a release or release-set document (``{}`` if none)."""
    return _first_field(release, "metadata")


def _codes(n: int) -> list[str]:
    return [str(j) for j in range(n)]


def _names(value, n: int) -> list[str] | None:
    """``value`` as ``n`` distinct strings, else None."""
    if not isinstance(value, (list, tuple)) or len(value) != n:
        return None
    out = [str(v) for v in value]
    return out if len(set(out)) == n else None


def axis_names(model: dict | None, release: dict | None,
               shapes: dict[str, tuple[int, ...]]) -> dict[str, list[Axis]]:
    """Public names of the axes of each parameter.

    Parameters
    ----------
    model, release : dict or None
        The model's and the release's JSON descriptions (``Posterior.model`` / ``.release``).
    shapes : dict
        Parameter name -> shape of one draw (``()`` for a scalar). Per-draw sampler statistics
        may be included too (the HMM state paths ``z`` of shape ``(R, T)``).

    Returns
    -------
    dict
        ``{name: [(dim, values, keyed), ...]}`` with one entry per axis of ``shapes[name]``
        (``len(values)`` equal to that axis' size), for the parameters whose axes the release
        names; other parameters are absent.
    """
    mtype = (model or {}).get("type") if isinstance(model, dict) else None
    q = release_query(release)
    meta = release_metadata(release)
    qtype = q.get("type")
    cols = q.get("columns") if isinstance(q.get("columns"), list) else []
    out: dict[str, list[Axis]] = {}

    def put(name: str, axes: list[Axis]) -> None:
        shp = shapes.get(name)
        if shp is not None and len(shp) == len(axes) and all(
                len(v) == s for (_, v, _), s in zip(axes, shp)):
            out[name] = axes

    if qtype == "histogram" and mtype == "dirichlet-categorical" and len(shapes.get("p", ())) == 1:
        k = shapes["p"][0]
        col = str(cols[0]) if cols else "category"
        put("p", [(col, _names(q.get("levels"), k) or _codes(k), False)])
    elif qtype in ("regression_stats", "covariate_moments") and len(shapes.get("beta", ())) == 1 \
            and cols:
        xcols = [str(c) for c in cols[:-1]]          # the response is the last column
        k = shapes["beta"][0]
        labels = ["intercept", *xcols] if k == len(xcols) + 1 else xcols
        put("beta", [("coefficient", _names(labels, k) or _codes(k), False)])
    elif qtype == "cell_counts" and mtype == "hmm" and len(shapes.get("pi", ())) == 1:
        K = shapes["pi"][0]
        states = _codes(K)
        put("pi", [("state", states, False)])
        put("A", [("from_state", states, False), ("to_state", states, False)])
        features = [str(c) for c in cols[2:]]
        lv = meta.get("levels") if isinstance(meta.get("levels"), dict) else {}
        for d, feat in enumerate(features):
            name = f"theta{d + 1}"
            if name in shapes and len(shapes[name]) == 2:
                J = shapes[name][1]
                put(name, [("state", states, False), (feat, _names(lv.get(feat), J) or _codes(J),
                                                      False)])
        if "z" in shapes and len(shapes["z"]) == 2:
            R, T = shapes["z"]
            put("z", [("region", _names(meta.get("regions"), R) or _codes(R), False),
                      ("time", _names(meta.get("times"), T) or _codes(T), False)])
    elif qtype == "naive_bayes_counts" and mtype == "naive-bayes" \
            and len(shapes.get("p", ())) == 1 and cols:
        I = shapes["p"][0]
        cls = str(cols[0])
        put("p", [(cls, _codes(I), True)])
        for k, feat in enumerate(cols[1:]):
            name = f"q{k + 1}"
            if name in shapes and len(shapes[name]) == 2:
                put(name, [(cls, _codes(I), True), (str(feat), _codes(shapes[name][1]), True)])
    elif mtype == "dirichlet" and len(shapes.get("alpha", ())) == 1:
        D = shapes["alpha"][0]
        parts = _names(_composition_columns(release), D)
        if parts:
            put("alpha", [("part", parts, False)])
    elif qtype == "marginal_tables" and mtype == "mrf":
        cliques = (model or {}).get("cliques") or []
        for j, clique in enumerate(cliques):
            name = f"theta{j}"
            if name not in shapes:
                continue
            try:
                vars_ = [str(cols[int(v)]) for v in clique]
            except (TypeError, ValueError, IndexError):
                continue
            put(name, [(v, _codes(s), True) for v, s in zip(vars_, shapes[name])])
    return out


def _composition_columns(release: dict | None):
    """The part names of a compositional release: the ``columns`` of its censored mean-log
    query (a single release, or the one in a DPss set, whose first release is the score)."""
    if not isinstance(release, dict):
        return None
    docs = release.get("releases") if isinstance(release.get("releases"), list) else [release]
    for doc in docs:
        q = doc.get("query") if isinstance(doc, dict) else None
        if isinstance(q, dict) and q.get("type") == "censored_log_mean" \
                and isinstance(q.get("columns"), list):
            return q["columns"]
    return None


def entry_label(name: str, idx: tuple[int, ...], axes: list[Axis] | None) -> str:
    """Label of entry ``idx`` of parameter ``name``: ``p[north]``, ``theta0[smoke=1, cough=0]``,
    or the index form ``A[0, 1]`` when the axes have no names."""
    if not idx:
        return name
    if axes is None:
        return f"{name}[{', '.join(map(str, idx))}]"
    parts = [f"{dim}={values[i]}" if keyed else str(values[i])
             for i, (dim, values, keyed) in zip(idx, axes)]
    return f"{name}[{', '.join(parts)}]"


def named_text(text: str, axes: dict[str, list[Axis]] | None) -> str:
    """``text`` (e.g. a NOT CONVERGED note listing ``theta0[0, 1] (r_hat ...)``) with every
    index label ``NAME[i, j]`` of a parameter with named axes replaced by its named label."""
    import re

    if not axes:
        return text

    def sub(m):
        name, inside = m.group(1), m.group(2)
        try:
            idx = tuple(int(t) for t in inside.split(","))
        except ValueError:
            return m.group(0)
        ax = axes.get(name)
        if ax is None or len(idx) != len(ax) or any(not 0 <= i < len(v) for i, (_, v, _) in
                                                    zip(idx, ax)):
            return m.group(0)
        return entry_label(name, idx, ax)

    names = "|".join(re.escape(k) for k in sorted(axes, key=len, reverse=True))
    return re.sub(rf"(?<![\w])({names})\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]", sub, text)


def _jsonable(axes: dict[str, list[Axis]]) -> Any:
    return {k: [[d, list(v), bool(kd)] for d, v, kd in ax] for k, ax in axes.items()}
