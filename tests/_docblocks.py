"""Run the code blocks of a Markdown page as a user would (shared by the docs tests).

* ```` ```python ```` blocks are executed in order in one namespace per page (a user pasting
  them into one session); what they print is captured.
* ```` ```console ```` blocks: every ``$ privpost ...`` line is run (the other lines are output).
* ```` ```bash ```` blocks: every command is run; backslash continuations are joined, ``#``
  comments dropped, ``NAME=value`` lines set a variable that later ``$NAME`` / ``${NAME}``
  arguments expand to. Every command must be a ``privpost`` command; it runs in-process through
  the Typer app (no console-script install needed) and must exit with status 0 and no traceback.
* Other blocks (``json``, plain) are not run; ``save_as={"json": "spec.json"}`` writes a page's
  blocks of that language to a file first, for pages that say "a spec file spec.json:".

The caller chdirs to a temporary directory first (``monkeypatch.chdir(tmp_path)``).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
_ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
_VAR = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block with a language tag, in page order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def commands(lang: str, body: str, env: dict | None = None) -> list[tuple[str, list[str]]]:
    """The commands of a console/bash block: (source line, argv) with variables expanded.

    ``env`` (updated in place) carries ``NAME=value`` assignments across blocks of a page.
    """
    env = {} if env is None else env
    if lang == "console":
        lines = [ln[2:] for ln in body.splitlines() if ln.startswith("$ ")]
    elif lang in ("bash", "sh", "shell"):
        lines = body.replace("\\\n", " ").splitlines()
    else:
        return []
    out = []
    for line in lines:
        args = shlex.split(line, comments=True)
        if not args:
            continue
        if len(args) == 1 and _ASSIGN.match(args[0]):
            name, value = _ASSIGN.match(args[0]).groups()
            env[name] = value
            continue
        args = [_VAR.sub(lambda m: env[m.group(1)], a) for a in args]
        out.append((line.strip(), args))
    return out


def invoke_cli(args: list[str], *, source: str = "", expect=0) -> tuple[int, str]:
    """Run ``privpost args[1:]`` in-process: (exit status, output), status and no traceback
    checked. ``expect``: the exit status required, or a tuple of the statuses allowed."""
    from typer.testing import CliRunner

    from privpost.cli import app

    assert args[0] == "privpost", f"not a privpost command: {source or args}"
    res = CliRunner().invoke(app, args[1:])
    allowed = expect if isinstance(expect, tuple) else (expect,)
    assert res.exit_code in allowed, f"{source}\nexit {res.exit_code}\n{res.output}"
    assert "Traceback" not in res.output, f"{source}\n{res.output}"
    return res.exit_code, res.output


def run_cli(args: list[str], *, source: str = "", expect=0) -> str:
    """:func:`invoke_cli`'s output."""
    return invoke_cli(args, source=source, expect=expect)[1]


def exec_python(body: str, ns: dict, name: str) -> str:
    """Execute one python block in ``ns``; return what it printed."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(body, name, "exec"), ns)
    return buf.getvalue()


@dataclass
class PageRun:
    """What running a page gave: per block (language, source, output) and the python namespace."""

    outputs: list[tuple[str, str, str]] = field(default_factory=list)
    ns: dict = field(default_factory=dict)
    status: dict = field(default_factory=dict)     # command source line -> exit status

    def output_of(self, fragment: str) -> str:
        """Output of the one command / block whose source contains ``fragment``, whitespace
        normalised (Rich wraps the CLI's lines at the terminal width)."""
        hits = [out for _, src, out in self.outputs if fragment in src]
        assert len(hits) == 1, f"{len(hits)} blocks/commands contain {fragment!r}"
        return " ".join(hits[0].split())

    @property
    def printed(self) -> str:
        return "".join(out for lang, _, out in self.outputs if lang == "python")


def page_text(page: str) -> str:
    return (DOCS / page).read_text()


def run_page(page: str, *, quick: dict[str, str] | None = None, skip=None,
             save_as: dict[str, str] | None = None, expect: dict | None = None,
             text: str | None = None) -> PageRun:
    """Run every block of ``docs/<page>`` in the current directory.

    quick : {old: new} text replacements in the blocks, for the size knobs the page itself
        offers ("for a quick look, add --draws 200"): both ``old`` and ``new`` must occur in the
        page, so the test runs what the page tells a reader to run.
    skip : predicate on a command's source line; True = not run here (a slow test runs it).
    save_as : {language: file name}: blocks of that language are written to that file.
    expect : {fragment: exit status or tuple of statuses} for commands whose documented status
        is not always 0 (``--strict`` exits 3 when not converged).
    text : the page text to run instead of the file (tests that break a page on purpose).
    """
    text = page_text(page) if text is None else text
    quick, expect, save_as = quick or {}, expect or {}, save_as or {}
    for old, new in quick.items():
        assert old in text and new in text, f"{page} must show {old!r} and offer {new!r}"
    run, env = PageRun(ns={"__name__": "__docs__"}), {}
    for i, (lang, body) in enumerate(blocks(text)):
        for old, new in quick.items():
            body = body.replace(old, new)
        if lang == "python":
            run.outputs.append((lang, body, exec_python(body, run.ns, f"{page}:block{i}")))
        elif lang in save_as:
            Path(save_as[lang]).write_text(body)
        else:
            for source, args in commands(lang, body, env):
                if skip is not None and skip(source):
                    continue
                status = next((s for frag, s in expect.items() if frag in source), 0)
                code, out = invoke_cli(args, source=source, expect=status)
                run.outputs.append((lang, source, out))
                run.status[source] = code
    return run
