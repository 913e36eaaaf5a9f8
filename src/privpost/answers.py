"""Quantities a person asks for, computed from a posterior's draws: the answers ``privpost
infer`` prints beside the parameter table, and the interval plot of ``infer --plot``.

* :func:`mrf_probabilities`: marginal and conditional probabilities of a clique MRF's variables
  (``"cough|smoke"`` -> ``P(cough=j | smoke=i)`` for every ``i, j``), one value per posterior
  draw, summarised by mean and equal-tailed interval. Computed exactly per draw by enumerating
  the joint state space (``prod(levels)`` <= ``CliqueMRF.ENUMERATE_MAX`` states).
* :func:`hmm_state_table`: the posterior probability of each hidden state in each region and
  time (from the sampled paths), by region and time name.
* :func:`interval_plot`: one panel per group of quantities, each a mean with its central
  interval, labelled by name, with a legend.
"""

from __future__ import annotations

import itertools

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["parse_query", "mrf_probabilities", "hmm_state_table", "interval_plot", "summarise_draws"]

#: at most this many draws are used for the per-draw MRF probabilities (evenly thinned)
MAX_DRAWS = 2000


def summarise_draws(values: np.ndarray, level: float) -> dict[str, float]:
    """``{"mean", "lo", "hi"}`` of the draws ``values`` ``(S,)``: the mean and the equal-tailed
    ``level`` interval."""
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return {"mean": float(values.mean()), "lo": float(lo), "hi": float(hi)}


def _parse_terms(text: str, columns: list[str], levels: list[int], what: str):
    """``"a=1,b"`` -> ``[(var index, level or None), ...]`` against the release's columns."""
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            raise PrivpostError(f"--query-prob {what!r}: an empty variable name")
        name, eq, val = tok.partition("=")
        name = name.strip()
        if name not in columns:
            raise PrivpostError(f"--query-prob: {name!r} is not a variable of the release "
                                f"(variables: {', '.join(columns)})")
        v = columns.index(name)
        lev = None
        if eq:
            try:
                lev = int(val.strip())
            except ValueError:
                raise PrivpostError(f"--query-prob: level {val.strip()!r} of {name!r} must be "
                                    f"an integer code 0..{levels[v] - 1}") from None
            if not 0 <= lev < levels[v]:
                raise PrivpostError(f"--query-prob: level {lev} of {name!r} is outside "
                                    f"0..{levels[v] - 1}")
        if any(v == w for w, _ in out):
            raise PrivpostError(f"--query-prob: {name!r} is named twice")
        out.append((v, lev))
    return out


def parse_query(query: str, columns: list[str], levels: list[int]):
    """``"A=1|B,C"`` -> ``(targets, conditions)``, each ``[(variable index, level or None)]``;
    a malformed query, an unknown variable or level is refused with a :class:`PrivpostError`."""
    if not isinstance(query, str) or query.count("|") > 1 or not query.strip():
        raise PrivpostError(f"--query-prob must look like 'A', 'A|B' or 'A=1|B=0,C', got {query!r}")
    head, bar, cond = query.partition("|")
    targets = _parse_terms(head, columns, levels, query)
    conds = _parse_terms(cond, columns, levels, query) if bar else []
    if {v for v, _ in targets} & {v for v, _ in conds}:
        raise PrivpostError(f"--query-prob {query!r}: a variable is both asked and given")
    return targets, conds


def mrf_probabilities(post, query: str, level: float = 0.9) -> dict[str, dict[str, float]]:
    """Posterior of ``P(targets | conditions)`` of a clique-MRF posterior.

    Parameters
    ----------
    post : Posterior
        From an ``mrf`` model fitted to a ``marginal_tables`` release (variable names are the
        release's ``columns``).
    query : str
        ``"A"`` (the marginal of A), ``"A|B"`` (A given B), ``"A=1|B=0,C"``; several variables
        separated by commas; a variable without ``=level`` takes every level.
    level : float
        Credible level of the intervals.

    Returns
    -------
    dict
        ``{"P(A=a | B=b)": {"mean", "lo", "hi"}}`` for every combination of the free levels;
        each is summarised over the posterior draws (at most :data:`MAX_DRAWS`, evenly thinned)
        of the exact probability under that draw's parameters.
    """
    from privpost.models.base import model_from_dict
    from privpost.names import release_query

    if not isinstance(post.model, dict) or post.model.get("type") != "mrf":
        raise PrivpostError("--query-prob applies to an mrf model")
    mdl = model_from_dict(post.model)
    cols = release_query(post.release).get("columns") or [f"x{v}" for v in range(len(mdl.levels))]
    cols = [str(c) for c in cols]
    if len(cols) != len(mdl.levels):
        raise PrivpostError("--query-prob: the release's columns do not match the model's levels")
    if mdl._design is None:
        raise PrivpostError(f"--query-prob: the joint space has {np.prod(mdl.levels, dtype=float):.3g}"
                            f" states, more than {mdl.ENUMERATE_MAX} (exact probabilities here "
                            "enumerate it)")
    targets, conds = parse_query(query, cols, list(mdl.levels))
    theta = np.concatenate([post.flat(nm).reshape(post.n_chains * post.n_draws, -1)
                            for nm in mdl.names], axis=1)                     # (S, d)
    if theta.shape[0] > MAX_DRAWS:
        theta = theta[np.linspace(0, theta.shape[0] - 1, MAX_DRAWS).astype(np.int64)]
    lp = theta @ mdl._design.T                                                # (S, states)
    lp -= lp.max(axis=1, keepdims=True)
    p = np.exp(lp)
    p /= p.sum(axis=1, keepdims=True)
    dom = mdl._dom                                                            # (states, T)

    def choices(terms):
        return [[lev] if lev is not None else range(mdl.levels[v]) for v, lev in terms]

    out = {}
    for cvals in itertools.product(*choices(conds)):
        cmask = np.ones(dom.shape[0], dtype=bool)
        for (v, _), c in zip(conds, cvals):
            cmask &= dom[:, v] == c
        denom = p[:, cmask].sum(axis=1)
        given = ", ".join(f"{cols[v]}={c}" for (v, _), c in zip(conds, cvals))
        for tvals in itertools.product(*choices(targets)):
            tmask = cmask.copy()
            for (v, _), t in zip(targets, tvals):
                tmask &= dom[:, v] == t
            asked = ", ".join(f"{cols[v]}={t}" for (v, _), t in zip(targets, tvals))
            label = f"P({asked}{' | ' + given if given else ''})"
            out[label] = summarise_draws(p[:, tmask].sum(axis=1) / denom, level)
    return out


def hmm_state_table(post) -> dict[str, dict[str, float]]:
    """``{"region R, time T": {"P(state k)": probability}}`` from the HMM samplers' paths
    ``post.sample_stats["z"]`` (region and time names from the release when it has them)."""
    from privpost.inference.hmm import state_probabilities

    if "z" not in post.sample_stats or "pi" not in post.draws:
        raise PrivpostError("no sampled state paths in this posterior (an HMM sampler keeps them)")
    prob = state_probabilities(post)                                          # (R, T, K)
    R, T, K = prob.shape
    axes = (post.axes or {}).get("z")
    regions = axes[0][1] if axes else [str(r) for r in range(R)]
    times = axes[1][1] if axes else [str(t) for t in range(T)]
    return {f"region {regions[r]}, time {times[t]}":
            {f"P(state {k})": float(prob[r, t, k]) for k in range(K)}
            for r in range(R) for t in range(T)}


def interval_plot(groups: dict[str, dict[str, dict[str, float]]], path, *, level: float,
                  title: str, max_rows: int = 40):
    """Save a PNG of means and central intervals, one panel per group.

    ``groups``: ``{panel title: {label: {"mean", "lo", "hi"}}}`` (at most ``max_rows`` labels a
    panel are drawn; the title says how many were left out). Returns the figure (closed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    groups = {k: v for k, v in groups.items() if v}
    if not groups:
        raise PrivpostError("--plot: nothing to draw")
    heights = [min(len(v), max_rows) for v in groups.values()]
    fig, axs = plt.subplots(len(groups), 1, squeeze=False,
                            figsize=(9.0, 1.2 + 0.32 * sum(heights) + 0.6 * len(groups)),
                            gridspec_kw={"height_ratios": [h + 1.5 for h in heights]})
    for i, (ax, (name, rows)) in enumerate(zip(axs[:, 0], groups.items())):
        labels = list(rows)[:max_rows]
        y = np.arange(len(labels))[::-1]
        lo = [rows[k]["lo"] for k in labels]
        hi = [rows[k]["hi"] for k in labels]
        ax.hlines(y, lo, hi, color="C0", lw=2.5, label=f"{100 * level:g}% interval")
        ax.plot([rows[k]["mean"] for k in labels], y, "o", color="C1", label="posterior mean")
        ax.set_yticks(y, labels)
        more = len(rows) - len(labels)
        ax.set_title(name + (f" (first {len(labels)}; {more} more)" if more > 0 else ""),
                     loc="left", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        if i == 0:                          # one legend, beside the first panel
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100, format="png")
    except (OSError, ValueError) as exc:      # no such folder, a folder, no permission
        raise PrivpostError(f"--plot {path}: cannot write the PNG file ({exc})") from None
    finally:
        plt.close(fig)
    return fig
