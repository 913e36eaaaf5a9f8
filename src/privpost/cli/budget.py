"""``privpost budget``: split a privacy budget across several releases of the same records
(:mod:`privpost.releases.budget`)."""

from __future__ import annotations

from typing import Optional

import typer

from privpost.cli._common import (app, _emit_json, handles_errors, out, _privacy_text)
from privpost.errors import PrivpostError


# ---------------------------------------------------------------------------- budget
@app.command("budget")
@handles_errors
def budget_cmd(
    weights: str = typer.Option(..., help="Relative weights, one per release: '1,1,2'."),
    epsilon: Optional[float] = typer.Option(None, help="Total pure-DP budget epsilon."),
    rho: Optional[float] = typer.Option(None, help="Total zCDP budget rho (Gaussian family)."),
    as_json: bool = typer.Option(False, "--json", help="Print the shares as JSON."),
):
    """Split a privacy budget across several releases of the same records; state the total."""
    from privpost.releases.budget import split_budget, total_of

    if (epsilon is None) == (rho is None):
        raise PrivpostError("give the total budget: --epsilon E (Laplace family) or --rho R "
                            "(Gaussian family)")
    kind = "pure" if epsilon is not None else "zcdp"
    shares = split_budget(epsilon if epsilon is not None else rho,
                          [w for w in weights.split(",") if w.strip()], kind=kind)
    total = total_of(shares, kind=kind)
    if as_json:
        _emit_json({"kind": kind, "shares": shares, "total": total.to_dict()})
        return
    flag = "--epsilon" if kind == "pure" else "--rho"
    for j, share in enumerate(shares):
        out.print(f"release {j}: {flag} {share!r}", highlight=False)
    out.print(f"total (sequential composition): {_privacy_text(total)}", highlight=False)
