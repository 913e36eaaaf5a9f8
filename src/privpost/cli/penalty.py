"""``privpost penalty``: penalty MCMC (Yildirim 2016) run by the curator on a CSV
(:mod:`privpost.inference.penalty`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from privpost.cli._common import (app, _check_overwrite, _emit_json, _FORCE_HELP, handles_errors,
                                  out, _parse_bounds, _print_summary, _privacy_text)
from privpost.errors import PrivpostError


# ---------------------------------------------------------------------------- penalty
@app.command("penalty")
@handles_errors
def penalty_cmd(
    data: Path = typer.Argument(..., help="CSV or Parquet file of confidential records."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the transcript "
                                "release JSON (the chain, its noisy ratios and its privacy)."),
    model: str = typer.Option(..., help="Model spec: 'beta-bernoulli:a=1,b=1', "
                              "'normal-known-variance:mu0=0,tau0=1,sigma=1' (with --bounds), "
                              "'logistic-regression-bounded:p=2,bound=1', 'bernoulli-logit'."),
    column: list[str] = typer.Option(..., help="Column(s) to read, in model order "
                                     "(logistic regression: x_1..x_p then y)."),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon of the whole transcript."),
    delta: float = typer.Option(..., help="Privacy budget delta, e.g. 1e-6."),
    bounds: Optional[str] = typer.Option(None, help="Public data bounds 'LOW,HIGH' (normal)."),
    iterations: Optional[int] = typer.Option(None, help="Iterations k (sigma is calibrated); "
                                             "default: the most the budget allows."),
    noise_sd: Optional[float] = typer.Option(None, help="Noise sd of the log acceptance ratio, "
                                             "all owners together (default 2.4) when "
                                             "--iterations is not given; honoured as given."),
    step: float = typer.Option(1.0, help="Box random-walk half-width c (h = c n^-alpha)."),
    variant: str = typer.Option("general", help="general (Algorithms 1/2) or expfam (3)."),
    accountant: str = typer.Option("tight", help="tight (exact Gaussian DP) or advanced "
                                   "(the paper's Theorems 2 + 3)."),
    owner_column: Optional[str] = typer.Option(None, help="Column naming each record's data "
                                               "owner (Algorithm 2)."),
    clip: Optional[float] = typer.Option(None, help="Clipping variant: clip each record's "
                                         "log-ratio to +-clip*|theta'-theta| (approximate)."),
    warmup: Optional[int] = typer.Option(None, help="Discarded iterations (default k/2)."),
    seed: Optional[int] = typer.Option(None, help="Seed (testing only; real runs use OS "
                                       "entropy)."),
    posterior: Optional[Path] = typer.Option(None, help="Also write the posterior (netCDF)."),
    progress: bool = typer.Option(True, help="Show progress."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
):
    """Penalty MCMC (Yildirim 2016) on a CSV: the curator's private Metropolis chain."""
    import warnings as _w

    from privpost.inference.penalty import penalty_mcmc
    from privpost.io import read_records

    _check_overwrite(output, force)
    _check_overwrite(posterior, force, "--posterior")
    records = read_records(data, list(column))
    owners = None
    if owner_column is not None:
        from privpost.io import read_table

        frame = read_table(data, [owner_column])     # the same limits as read_records
        if owner_column not in frame.columns:
            raise PrivpostError(f"--owner-column: {data} has no column {owner_column!r}")
        owners = frame[owner_column].astype(str).to_numpy()
    with _w.catch_warnings(record=True):
        _w.simplefilter("always")
        res = penalty_mcmc(records, model, epsilon=epsilon, delta=delta, iterations=iterations,
                           noise_sd=noise_sd, step=step, owners=owners, variant=variant,
                           accountant=accountant, clip=clip, warmup=warmup,
                           bounds=_parse_bounds(bounds) if bounds else None, seed=seed,
                           progress=progress and not as_json)
    res.release.save(output)
    if posterior is not None:
        res.posterior.to_netcdf(posterior)
    rel = res.release
    if as_json:
        table = res.posterior.summary()
        _emit_json({"output": str(output), "privacy": res.privacy.to_dict(),
                    "iterations": rel.iterations, "iterations_allowed": res.iterations_allowed,
                    "acceptance": res.acceptance, "noise_sd": rel.ratio_sd,
                    "release_sd": rel.release_sd,
                    "sensitivity": rel.sensitivity, "notes": res.posterior.notes,
                    "summary": {str(k): {c: float(v) for c, v in row.items()}
                                for k, row in table.iterrows()}})
        return
    out.print(f"wrote [bold]{output}[/]: {rel.iterations} iterations of penalty MCMC on "
              f"{rel.n} records ({len(rel.owner_sizes)} owner(s)); {_privacy_text(res.privacy)}; "
              f"iterations allowed: tight {res.iterations_allowed['tight']}, advanced "
              f"{res.iterations_allowed['advanced']}; acceptance {res.acceptance:.3f}")
    _print_summary(res.posterior)
