"""``privpost infer`` and ``privpost compare``: posteriors of a model given a release, printed,
written (``-o``), plotted, with the answers to ``--query-prob`` and the predictive check."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from privpost.cli.methods import InferCommand as _InferCommand  # --method/--draws help
from privpost.cli._common import (app, _check_overwrite, _emit_json, _fmt, _FORCE_HELP,
                                  handles_errors, _load_release_or_set, out, _not_covered_notes,
                                  _print_not_covered,
                                  _print_summary, _privacy_statement, _privacy_text)
from privpost.errors import PrivpostError


def _check_infer_options(level: float, output, seed) -> None:
    """Every infer option is checked before sampling starts (not after the work is done)."""
    import math

    if not (math.isfinite(level) and 0.0 < level < 1.0):
        raise PrivpostError(f"--level must be a credible level strictly between 0 and 1 "
                            f"(e.g. 0.9), got {level}")
    if seed is not None and seed < 0:
        raise PrivpostError(f"--seed must be an integer >= 0, got {seed}")
    if output is not None:
        import os

        parent = Path(output).expanduser().resolve().parent
        if Path(output).is_dir():
            raise PrivpostError(f"--output {output}: is a directory; give a file name ending in .nc")
        if not parent.is_dir():
            raise PrivpostError(f"--output {output}: the directory {parent} does not exist; "
                                "create it first or choose another path")
        if not os.access(parent, os.W_OK):
            raise PrivpostError(f"--output {output}: the directory {parent} is not writable")


def _parse_options(items: list[str]) -> dict:
    parsed = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PrivpostError(f"--option must look like KEY=VALUE, got {item!r}")
        try:
            parsed[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key.strip()] = value
    return parsed


def _model_for(spec: str, rel, quiet: bool = False):
    """Model from ``--model``, with the sizes the release determines filled in and printed."""
    from privpost.models.spec import model_for_release

    mdl, inferred = model_for_release(spec, rel)
    if inferred and not quiet:
        text = ", ".join(f"{k} = {v}" for k, v in inferred.items())
        out.print(f"[dim]model:[/] {text} (from the release)", highlight=False)
    return mdl, inferred


@app.command("infer", cls=_InferCommand)
@handles_errors
def infer_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    model: str = typer.Option(..., help="Model spec, e.g. 'beta-bernoulli:a=1,b=1'."),
    method: str = typer.Option("damcmc", help="(the registry's methods: privpost methods)"),
    draws: Optional[int] = typer.Option(None, min=1, help="(from the registry: privpost "
                                        "methods)"),
    warmup: Optional[int] = typer.Option(None, min=0, help="Warm-up iterations per chain. "
                                         "Default: the method's own (damcmc, dpmcmc: the "
                                         "model's, 300 for the Dirichlet, else 1000; gibbs-ss "
                                         "1000; the HMM samplers' are in docs/hmm.md)."),
    chains: Optional[int] = typer.Option(None, min=1, help="Chains. Default: the method's own "
                                         "(4; 1 for ops, whose every chain is one more "
                                         "released sample)."),
    seed: Optional[int] = typer.Option(None),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="netCDF file for the "
                                          "posterior (ArviZ format)."),
    level: float = typer.Option(0.9, help="Credible level of the reported intervals."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    option: Optional[list[str]] = typer.Option(
        None, "--option", help="Extra method option KEY=VALUE (repeatable; VALUE parsed as JSON "
        "when possible), e.g. --option covariate_moments=prior for gibbs-ss regression."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    predictive: bool = typer.Option(False, "--predictive", help="Posterior predictive check "
                                    "of the release (replicated noisy values, p-values); "
                                    "-o then also holds posterior_predictive/observed_data."),
    predictive_plot: Optional[Path] = typer.Option(None, help="PNG of the predictive check "
                                                   "(implies --predictive)."),
    strict: bool = typer.Option(False, "--strict", help="Exit with status 3 when an MCMC run "
                                "misses split R-hat <= 1.01 or bulk/tail ESS >= 400."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    query_prob: Optional[list[str]] = typer.Option(
        None, "--query-prob", help="MRF models: print the posterior of a probability, e.g. "
        "--query-prob 'cough|smoke' (P(cough=j | smoke=i) for every i, j), 'cough=1|smoke=1,"
        "age', or 'cough' (a marginal); repeatable. Variables are the release's columns. "
        "Default: every variable's marginal."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG of the posterior: mean and "
                                        "interval of every parameter entry (and of every "
                                        "--query-prob answer), by name."),
):
    """Posterior of a model's parameters given a release."""
    import warnings

    from privpost.errors import ConvergenceWarning, ModelFitWarning

    from privpost.inference import infer

    _check_infer_options(level, output, seed)
    _check_overwrite(output, force)
    _check_overwrite(predictive_plot, force, "--predictive-plot")
    if "," in method:       # several methods: the comparison table (None: each method's own)
        if query_prob or plot is not None:
            raise PrivpostError("--query-prob and --plot apply to one method (for several, "
                                "use privpost compare --plot)")
        return _run_compare(path, model, method, draws, warmup, chains, seed, level, progress,
                            option, as_json, None)
    _check_overwrite(plot, force, "--plot")
    rel = _load_release_or_set(path)
    mdl, inferred = _model_for(model, rel, quiet=as_json)
    _check_query_prob(query_prob, mdl, rel)
    options = dict(seed=seed, progress=progress and not as_json)
    for key, value in (("draws", draws), ("warmup", warmup), ("chains", chains)):
        if value is not None:         # else the method's own default
            options[key] = value
    options.update(_parse_options(option or []))
    if method == "damcmc":   # Numba's BLAS check without importing all of scipy.linalg
        from privpost.cli._blas_preload import preload_cython_blas

        preload_cython_blas()
    with warnings.catch_warnings():   # shown highlighted in the table (a note) instead
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", ModelFitWarning)    # a "MODEL MISFIT" note
        post = infer(mdl, rel, method=method, **options)
    check = None
    if predictive or predictive_plot is not None:
        check = post.predictive(rel, model=mdl, seed=seed)
        if predictive_plot is not None:
            check.plot(predictive_plot)
    if output is not None:
        post.to_netcdf(output)
    answers = _answers(post, query_prob, level)
    if plot is not None:
        _plot_posterior(post, answers, plot, level)
    if as_json:
        from privpost.inference._count_latent import latent_of
        from privpost.names import named_text

        latent, table = latent_of(post)
        _emit_json({"method": post.method, "exact": post.exact, "converged": post.converged,
                    "latent": latent, "latent_table": table,
                    "notes": [named_text(n, post.axes) for n in post.notes],
                    "release_privacy": _privacy_statement(rel),
                    "inferred_from_release": inferred,
                    "output": str(output) if output else None,
                    "summary": post.summary_rows(level=level),
                    "predictive": check.to_dict() if check is not None else None,
                    **answers})
    else:
        # the release's not-covered statements (in the notes: infer()) are printed once, under
        # the guarantee they qualify
        said = _not_covered_notes(rel)
        _print_summary(post, level, skip=said)
        _print_answers(answers, level)
        if said:
            p = rel.total_privacy() if hasattr(rel, "total_privacy") else rel.privacy
            out.print(f"release privacy: {_privacy_text(p)}", highlight=False)
            _print_not_covered(rel)
        if check is not None:
            _print_predictive(check)
        for path_written in (output, predictive_plot, plot):
            if path_written is not None:
                out.print(f"wrote [bold]{path_written}[/]")
    # no file left open (to_netcdf has closed the netCDF file it wrote): may exit quickly
    if predictive_plot is None and plot is None:
        from privpost.cli._exit import allow

        allow()
    if strict and post.converged is False:
        raise typer.Exit(code=3)


def _check_query_prob(queries, mdl, rel) -> None:
    """Refuse a --query-prob before any sampling: only for mrf models, with known variables."""
    if not queries:
        return
    if getattr(mdl, "name", None) != "mrf":
        raise PrivpostError("--query-prob applies to an mrf model (marginal-tables releases)")
    from privpost.answers import parse_query
    from privpost.names import release_query

    cols = release_query(rel.to_dict()).get("columns") or [f"x{v}" for v in
                                                           range(len(mdl.levels))]
    for q in queries:
        parse_query(q, [str(c) for c in cols], list(mdl.levels))


def _answers(post, queries, level: float) -> dict:
    """The quantities asked for (--query-prob) and the HMM state probabilities, for printing
    and --json: ``{"probabilities": {query: {label: {mean, lo, hi}}}, "state_probabilities":
    {cell: {state: p}}}`` (keys present only when they apply)."""
    from privpost import answers as ans

    out: dict = {}
    if not queries and isinstance(post.model, dict) and post.model.get("type") == "mrf":
        # no question asked: every variable's marginal (when the joint space is enumerable)
        from privpost.models.mrf import CliqueMRF
        from privpost.names import release_query

        levels = post.model.get("levels") or []
        if math.prod(levels) <= CliqueMRF.ENUMERATE_MAX:
            queries = [str(c) for c in (release_query(post.release).get("columns") or [])]
    if queries:
        out["probabilities"] = {q: ans.mrf_probabilities(post, q, level) for q in queries}
    if "z" in post.sample_stats and "pi" in post.draws:
        out["state_probabilities"] = ans.hmm_state_table(post)
    return out


def _print_answers(answers: dict, level: float) -> None:
    for q, rows in answers.get("probabilities", {}).items():
        t = Table(title=f"{q}: posterior mean and {100 * level:g}% interval", box=None,
                  pad_edge=False, padding=(0, 1), header_style="bold")
        for col, just in (("probability", "left"), ("mean", "right"), ("lo", "right"),
                          ("hi", "right")):
            t.add_column(col, justify=just)
        for label, r in rows.items():
            t.add_row(escape(label), *[f"{r[c]:.4f}" for c in ("mean", "lo", "hi")])
        out.print(t)
    states = answers.get("state_probabilities")
    if states:
        t = Table(title="hidden state probabilities by region and time (posterior, from the "
                  "sampled paths)", box=None, pad_edge=False, padding=(0, 1),
                  header_style="bold")
        t.add_column("cell")
        first = next(iter(states.values()))
        for col in first:
            t.add_column(col, justify="right")
        for cell, probs in list(states.items())[:50]:
            t.add_row(escape(cell), *[f"{v:.3f}" for v in probs.values()])
        if len(states) > 50:
            t.add_row(f"... ({len(states) - 50} more: --json lists them all)")
        out.print(t)


def _plot_posterior(post, answers: dict, path: Path, level: float) -> None:
    """--plot: every parameter's entries (named) and every --query-prob answer."""
    from privpost.answers import interval_plot

    lo, hi = f"q{100 * (1 - level) / 2:g}", f"q{100 * (1 + level) / 2:g}"
    groups: dict = {}
    for label, row in post.summary_rows(level=level).items():
        groups.setdefault(label.partition("[")[0], {})[label] = {
            "mean": row["mean"], "lo": row[lo], "hi": row[hi]}
    groups = {**answers.get("probabilities", {}), **groups}
    interval_plot(groups, path, level=level,
                  title=f"privpost posterior ({post.method}{'' if post.exact else ', approximate'})")


def _print_predictive(check) -> None:
    table = check.summary()
    t = Table(title=f"posterior predictive check ({check.flat.shape[0]} replicated releases, "
              "noise included)", box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    cols = list(table.columns)
    t.add_column("coordinate")
    for col in cols:
        t.add_column(col, justify="right")
    for label, row in list(table.iterrows())[:50]:
        t.add_row(escape(str(label)), *[f"{row[c]:.3f}" if c in ("p", "p_ge") else
                                         f"{row[c]:.4g}" for c in cols])
    out.print(t)
    out.print(f"joint p (Mahalanobis distance) = {check.joint_p_value():.3f}; p near 0 means "
              "the model does not reproduce the published values", highlight=False)


# ---------------------------------------------------------------------------- compare
@app.command("compare")
@handles_errors
def compare_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    model: str = typer.Option(..., help="Model spec, e.g. 'beta-bernoulli:a=1,b=1'."),
    methods: Optional[str] = typer.Option(None, help="Comma-separated methods (default: "
                                          "damcmc,gibbs-ss,naive; randomized-response for "
                                          "randomized-response reports); those that do not "
                                          "apply are listed with the reason."),
    draws: Optional[int] = typer.Option(None, min=1, help="Draws per chain, for every method. "
                                        "Default: each method's own (as for infer)."),
    warmup: Optional[int] = typer.Option(None, min=0, help="Warm-up iterations per chain, for "
                                         "every method. Default: each method's own."),
    chains: Optional[int] = typer.Option(None, min=1, help="Chains, for every method. Default: "
                                         "each method's own (4; 1 for ops)."),
    seed: Optional[int] = typer.Option(None),
    level: float = typer.Option(0.9, help="Credible level of the intervals."),
    plot: Optional[Path] = typer.Option(None, help="PNG file for the overlay of the posteriors."),
    progress: bool = typer.Option(True, help="Show progress."),
    option: Optional[list[str]] = typer.Option(
        None, "--option", help="KEY=VALUE for every method, or METHOD.KEY=VALUE for one "
        "(e.g. --option gibbs-ss.covariate_moments=prior)."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
):
    """Run every applicable method on one release: one table and an overlay plot."""
    _check_overwrite(plot, force, "--plot")
    _run_compare(path, model, methods, draws, warmup, chains, seed, level, progress, option,
                 as_json, plot)


def _run_compare(path, model, methods, draws, warmup, chains, seed, level, progress, option,
                 as_json, plot):
    from privpost.compare import compare

    rel = _load_release_or_set(path)
    mdl, inferred = _model_for(model, rel, quiet=as_json)
    names = [m.strip() for m in (methods or "").split(",") if m.strip()] or None
    common: dict[str, Any] = {}
    per: dict[str, dict] = {}
    for key, value in _parse_options(option or []).items():
        head, dot, rest = key.partition(".")
        if dot and head in (names or []) + ["damcmc", "gibbs-ss", "naive",
                                            "randomized-response"]:
            per.setdefault(head, {})[rest] = value
        else:
            common[key] = value
    result = compare(mdl, rel, names, level=level, options=per, draws=draws, warmup=warmup,
                     chains=chains, seed=seed, progress=progress and not as_json, **common)
    if plot is not None:
        result.plot(plot)
    if as_json:
        doc = result.to_dict()
        doc.update(inferred_from_release=inferred, plot=str(plot) if plot else None,
                   release_privacy=_privacy_statement(rel))
        _emit_json(doc)
        return
    lo_name, hi_name = f"q{100 * (1 - level) / 2:g}", f"q{100 * (1 + level) / 2:g}"
    t = Table(title=f"methods on one release ({100 * level:g}% equal-tailed intervals)",
              box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for col in ("parameter", "method", "mean", lo_name, hi_name, "width", "r_hat", "ess",
                "time/s", "kind"):
        t.add_column(col, justify="left" if col in ("parameter", "method", "kind") else "right",
                     no_wrap=True)
    for r in sorted(result.rows(), key=lambda r: r["parameter"]):
        t.add_row(escape(r["parameter"]), r["method"], f"{r['mean']:.3g}", f"{r['lo']:.3g}",
                  f"{r['hi']:.3g}", f"{r['width']:.3g}", _fmt(r["r_hat"], "r_hat"),
                  _fmt(r["ess_bulk"], "ess_bulk"), f"{r['seconds']:.1f}",
                  "exact" if r["exact"] else "approx")
    out.print(t)
    for method, reason in result.skipped.items():
        out.print(f"[dim]not applicable:[/] {method}: {escape(reason)}", highlight=False)
    # the guarantee every method's answer rests on, and what the release publishes outside it
    # (as infer prints them)
    p = rel.total_privacy() if hasattr(rel, "total_privacy") else getattr(rel, "privacy", None)
    if p is not None:
        out.print(f"release privacy: {_privacy_text(p)}", highlight=False)
    _print_not_covered(rel)
    if plot is not None:
        out.print(f"wrote [bold]{plot}[/]")
