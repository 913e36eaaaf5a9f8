"""``privpost release-cells``: private per-cell count release of a long-format report file.

``cli.py`` calls :func:`register` with its Typer app, its error decorator and its console.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from privpost.errors import PrivpostError

__all__ = ["register"]


def _names(text: Optional[str], option: str) -> Optional[list[str]]:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise PrivpostError(f"--{option}: give a comma-separated list of values")
    return items


def register(app: typer.Typer, handles_errors, out) -> None:
    @app.command("release-cells")
    @handles_errors
    def release_cells_cmd(
        data: Path = typer.Argument(..., help="CSV or Parquet file, one row per report."),
        output: Path = typer.Option(..., "--output", "-o", help="Where to write the release."),
        feature: list[str] = typer.Option(..., "--feature", "-f", help="Categorical feature "
                                          "column (repeat for each feature, in order)."),
        region: str = typer.Option("region", help="Column of the region code."),
        time: str = typer.Option("time", help="Column of the time step (e.g. month)."),
        epsilon: Optional[float] = typer.Option(None, help="Total epsilon (all features)."),
        epsilon_per_feature: Optional[float] = typer.Option(
            None, help="Epsilon per feature (the paper: 1); total = D times this."),
        mechanism: str = typer.Option("laplace", help="laplace, discrete_laplace, gaussian, "
                                      "discrete_gaussian."),
        delta: Optional[float] = typer.Option(None, help="delta (Gaussian)."),
        rho: Optional[float] = typer.Option(None, help="zCDP rho (Gaussian family)."),
        regions: Optional[str] = typer.Option(None, help="Public region codes 'A,B,...' "
                                              "(default: those in the file; data-dependent)."),
        times: Optional[str] = typer.Option(None, help="Public time codes (default: those in "
                                            "the file)."),
        epsilon_sizes: Optional[float] = typer.Option(
            None, "--epsilon-sizes", help="Release the cell sizes N[region, time] privately too "
            "(discrete Laplace at this epsilon, scale 2/epsilon) instead of exactly: the output "
            "is a release set [counts with the sizes withheld, noisy sizes], total epsilon = "
            "counts + sizes (sequential composition); read by infer --method damcmc."),
        seed: Optional[int] = typer.Option(None, help="Seed (testing only)."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing output file "
                                   "(without it an existing file is never replaced)."),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON summary (output, n, "
                                     "cells, mechanism, privacy statement)."),
    ):
        """Release the counts n[region, time, feature, level] of a long-format report file.

        Each feature's count vector has L1 sensitivity 2 (replace-one); features compose
        sequentially, cells in parallel: one Laplace scale 2D/epsilon on every count. The cell
        sizes are published exactly (outside the guarantee) unless --epsilon-sizes releases
        them with noise too.
        """
        from privpost.cli._common import _check_overwrite
        from privpost.queries.cell_counts import load_long_csv
        from privpost.mechanisms import mechanism_from_dict

        _check_overwrite(output, force)
        feats = list(feature)
        if (epsilon is None) == (epsilon_per_feature is None) and rho is None:
            raise PrivpostError("give exactly one of --epsilon (total) or --epsilon-per-feature")
        eps = epsilon if epsilon is not None else (
            None if epsilon_per_feature is None else epsilon_per_feature * len(feats))
        data_ = load_long_csv(data, feats, region=region, time=time,
                              regions=_names(regions, "regions"), times=_names(times, "times"))
        mdoc = {"type": mechanism}
        for key, value in (("epsilon", eps), ("delta", delta), ("rho", rho)):
            if value is not None:
                mdoc[key] = value
        try:
            mech = mechanism_from_dict(mdoc)
        except PrivpostError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise PrivpostError(f"mechanism: {exc}") from None
        # the parts of the domain read from the file ("domain_from_data", stated with the
        # guarantee wherever it is printed: privpost.releases.release.unprotected) come from
        # the library (LongData.metadata); feature levels are always the file's distinct
        # values here (no option declares them)
        meta = {"source": Path(data).name, **data_.metadata()}
        q = data_.query()
        from privpost.releases.cells import release_cells

        doc = release_cells(data_.records, q, mech, epsilon_sizes=epsilon_sizes, seed=seed,
                            metadata=meta)
        doc.save(output)
        rel = doc if epsilon_sizes is None else doc.releases[0]     # the counts
        sizes = None if epsilon_sizes is None else doc.releases[1]
        R, T = q.n_regions, q.n_times
        privacy = doc.privacy if sizes is None else doc.total_privacy()
        from privpost.cli._common import (_emit_json, _not_covered_notes, _print_not_covered,
                                          _privacy_statement, _privacy_text)

        if as_json:
            _emit_json({"output": str(output), "n": rel.n, "regions": R, "times": T,
                        "features": feats, "mechanism": rel.mechanism.to_dict(),
                        "sizes_mechanism": None if sizes is None else sizes.mechanism.to_dict(),
                        "privacy": _privacy_statement(doc),
                        "domain_note": meta.get("domain_note"),
                        "notes": _not_covered_notes(doc)})
            return
        what = ("" if sizes is None else
                f"; cell sizes released with discrete_laplace scale "
                f"{sizes.mechanism.scale:.6g} ({_privacy_text(sizes.privacy)})")
        out.print(f"wrote [bold]{output}[/]: counts of {rel.n} reports in {R} x {T} cells, "
                  f"{len(feats)} features, {mech.name} scale {rel.mechanism.scale:.6g}{what}; "
                  f"privacy {_privacy_text(privacy)}"
                  + ("" if sizes is None else " (counts + sizes, sequential composition)"),
                  highlight=False)
        _print_not_covered(doc)
