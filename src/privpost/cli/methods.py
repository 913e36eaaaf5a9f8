"""``privpost methods``: the method registry (:mod:`privpost.inference.registry`) as a table,
as JSON (``--json``) or as the README's markdown table (``--markdown``); and the ``infer``
command class whose ``--method`` help is generated from the registry when help is shown (so
that ``privpost --help`` still imports nothing of ``privpost.inference``).

:mod:`privpost.cli` calls :func:`register` with its Typer app, its error decorator and its
console; :mod:`privpost.cli.infer` uses :class:`InferCommand`.
"""

from __future__ import annotations

import json

import typer
import typer.core

__all__ = ["register", "InferCommand", "method_help"]


def method_help() -> str:
    """The help of ``privpost infer --method``, from the registry."""
    from privpost.inference.registry import help_text

    return (f"Method, or several comma-separated (a comparison table). One of: {help_text()}. "
            "`privpost methods` lists what each reads and its options.")


def draws_help() -> str:
    """The help of ``privpost infer --draws``, from the registry's lengths."""
    from privpost.inference.registry import until_converged

    return (f"Draws per chain. Default: {until_converged()} run until R-hat <= 1.01 and "
            "ESS >= 400 (or their budget, --option max_seconds=...), as do dpabc's p5 prior "
            "chains (--option p5_options=...); the other methods their own fixed size "
            "(privpost methods --json lists every default).")


class InferCommand(typer.core.TyperCommand):
    """``infer``: its ``--method`` and ``--draws`` help come from the registry (filled in when
    help is shown, so that building the CLI imports nothing of ``privpost.inference``)."""

    def format_help(self, ctx, formatter):
        for p in self.params:
            if getattr(p, "name", None) == "method":
                p.help = method_help()
            elif getattr(p, "name", None) == "draws":
                p.help = draws_help()
        return super().format_help(ctx, formatter)


def register(app: typer.Typer, handles_errors, out) -> None:
    @app.command("methods")
    @handles_errors
    def methods_cmd(
        as_json: bool = typer.Option(False, "--json", help="The registry as JSON (with every "
                                     "option's type, range and default)."),
        markdown: bool = typer.Option(False, "--markdown", help="The README's method table."),
    ) -> None:
        """List the inference methods: what each reads, whether it is exact, how it decides
        its length, and its options."""
        from privpost.inference import registry

        if as_json:
            typer.echo(json.dumps(registry.as_json(), indent=1))
            return
        if markdown:
            typer.echo(registry.markdown_table())
            return
        from rich.markup import escape
        from rich.table import Table

        t = Table(title="inference methods (privpost infer --method NAME)")
        for col in ("method", "exact", "models", "releases", "length", "options"):
            t.add_column(col)
        for m in registry.REGISTRY:
            opts = sorted({o.name for r in m.routes for o in r.options})
            length = ", ".join(dict.fromkeys(r.length.label for r in m.routes))
            t.add_row(m.name, "yes" if m.exact else "no",
                      ", ".join(k.label for k in m.model_kinds),
                      ", ".join(k.label for k in m.release_kinds), length,
                      escape(", ".join(opts)))
        out.print(t)
