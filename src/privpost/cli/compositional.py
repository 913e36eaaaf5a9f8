"""``privpost dpss``: the curator's DPss release of a CSV of compositions (seed 002)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from privpost.errors import PrivpostError


def register(app, handles_errors, out) -> None:
    """Add the ``dpss`` command to the Typer ``app``."""

    @app.command("dpss")
    @handles_errors
    def dpss_cmd(
        data: Path = typer.Argument(..., help="CSV or Parquet file, one composition per row."),
        output: Path = typer.Option(..., "--output", "-o", help="Where to write the release set."),
        column: list[str] = typer.Option(..., help="The D part columns, in order (repeat)."),
        epsilon1: float = typer.Option(..., help="Budget of the censored mean-log statistic."),
        epsilon2: float = typer.Option(..., help="Budget of the threshold score."),
        split: Optional[float] = typer.Option(None, help="Data split: fraction (0, 1) of records "
                                              "in D1 (for the p2-p5 priors), or a count >= 1."),
        rule: str = typer.Option("prose", help="Threshold rule: prose (default), prose-upper, "
                                 "printed (see privpost.releases.dpss.RULES)."),
        thresholds: Optional[str] = typer.Option(None, help="Candidate thresholds, decreasing, "
                                                 "comma-separated (default 0.1,...,1e-6)."),
        seed: Optional[int] = typer.Option(None, help="Seed (testing only; real releases use "
                                           "OS entropy)."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing output file "
                                   "(without it an existing file is never replaced)."),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON summary (output, n, "
                                     "split, threshold, privacy statement)."),
    ):
        """DPss release (seed 002, Algorithm 1): noisy score, threshold, censored mean-log."""
        from privpost.cli._common import _check_overwrite
        from privpost.releases.dpss import DEFAULT_THRESHOLDS, dpss_release, parse_dpss
        from privpost.io import read_records

        _check_overwrite(output, force)

        ths = DEFAULT_THRESHOLDS
        if thresholds:
            try:
                ths = tuple(float(v) for v in thresholds.split(","))
            except ValueError:
                raise PrivpostError(f"--thresholds must be numbers separated by commas, e.g. "
                                    f"0.1,0.01,0.001; got {thresholds!r}") from None
        if len(column) < 2:
            raise PrivpostError("--column: give the D >= 2 part columns, e.g. --column pc "
                                "--column eat --column other")
        sp = None
        if split is not None:
            sp = int(split) if split >= 1 and float(split).is_integer() else float(split)
        records = read_records(data, column)
        rset = dpss_release(records, epsilon1, epsilon2, thresholds=ths, split=sp, rule=rule,
                            columns=column, seed=seed)
        rset.save(output)
        d = parse_dpss(rset)
        if as_json:
            from privpost.cli._common import _emit_json, _privacy_statement

            _emit_json({"output": str(output), "n": d.n,
                        "n1": d.n1 if d.split else None, "n2": d.n2 if d.split else None,
                        "threshold": d.threshold, "rule": d.rule, "margin_k": d.margin_k,
                        "releases": len(rset.releases), "privacy": _privacy_statement(rset)})
            return
        parts = (f"D1: {d.n1}, D2: {d.n2} records" if d.split else f"{d.n} records")
        out.print(f"wrote [bold]{output}[/]: DPss release of {d.n} compositions ({parts}); "
                  f"threshold a = {d.threshold:g} (rule {d.rule}, margin k = {d.margin_k}); "
                  f"total {rset.total_privacy()}")
