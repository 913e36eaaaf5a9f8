"""Python warnings raised while a CLI command runs, printed once and formatted (no source paths).

Every ``privpost`` command runs under :func:`collected` (``cli.handles_errors``): the warnings
are recorded instead of printed by Python (``path/to/file.py:123: ConvergenceWarning: ...``),
and :func:`lines` turns them into what the command prints on stderr at its end:

* all :class:`~privpost.errors.ConvergenceWarning` s in one line -- the message itself when
  there is one, else ``NOT CONVERGED in N runs (damcmc x90, gibbs-ss x7); the first: ...`` (a
  ``reproduce`` or ``calibrate`` run fits many posteriors);
* every other warning once, with ``(xN)`` when the same message was recorded N times (Python's
  filters stay as they are: its ``default`` action already records a message raised again at
  the same line once, which bounds the record of a warning raised in a loop).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections import Counter

__all__ = ["collected", "lines"]

#: longest message text printed per line (a NOT CONVERGED message lists entries)
MAX_CHARS = 600


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 3] + "..."


def lines(records) -> list[str]:
    """Formatted lines (plain text) for the recorded warnings ``records``
    (``warnings.WarningMessage`` objects, in the order raised)."""
    from privpost.errors import ConvergenceWarning

    conv = [r for r in records if issubclass(r.category, ConvergenceWarning)]
    other = Counter((r.category.__name__, " ".join(str(r.message).split()))
                    for r in records if not issubclass(r.category, ConvergenceWarning))
    out = []
    if len(conv) == 1:
        out.append(f"WARNING: {_short(conv[0].message)}")
    elif conv:
        methods = Counter()
        for r in conv:
            m = re.match(r"\s*NOT CONVERGED \(([^,)]+)", str(r.message))
            methods[m.group(1) if m else "other"] += 1
        per = ", ".join(f"{k} x{v}" for k, v in methods.most_common())
        out.append(f"WARNING: NOT CONVERGED in {len(conv)} runs ({per}); the first: "
                   f"{_short(conv[0].message)}")
    for (cat, msg), n in other.items():
        out.append(f"warning ({cat}): {_short(msg)}" + (f" (x{n})" if n > 1 else ""))
    return out


@contextlib.contextmanager
def collected(console):
    """Record the warnings raised inside; print :func:`lines` on ``console`` at exit (also
    when the command fails or exits early). Every ConvergenceWarning is counted."""
    from rich.markup import escape

    from privpost.errors import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        try:
            yield caught
        finally:
            for line in lines(caught):
                style = "bold red" if line.startswith("WARNING") else "yellow"
                console.print(f"[{style}]{escape(line)}[/]", highlight=False, soft_wrap=True)
