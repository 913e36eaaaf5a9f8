"""The ``privpost`` command-line interface (Typer + Rich).

Exit codes: 0 success; 1 a user error (bad data, bad release, incompatible model), reported in
one line on stderr; 2 a usage error (unknown option, missing argument).

One module per command group, each importing only :mod:`privpost.cli._common` (the ``app``, the
consoles, error handling, ``--json`` output, the ``--spec`` reader, shared printing) and the
library below it; this package imports the groups, which registers their commands on ``app`` in
the order ``privpost --help`` lists them:

* :mod:`~privpost.cli.release` -- ``release``, ``declare``, ``inspect``, ``bundle``
* :mod:`~privpost.cli.infer` -- ``infer``, ``compare``
* :mod:`~privpost.cli.budget` -- ``budget``
* :mod:`~privpost.cli.penalty` -- ``penalty``
* :mod:`~privpost.cli.demo` -- ``demo``
* :mod:`~privpost.cli.experiments` -- ``calibrate``, ``reproduce``
* :mod:`~privpost.cli.cells` -- ``release-cells`` (per-cell counts for the HMM, seed 004)
* :mod:`~privpost.cli.compositional` -- ``dpss`` (the DPss release, seed 002)
* :mod:`~privpost.cli.methods` -- ``methods`` (the method registry; also the ``infer`` command
  class whose ``--method`` / ``--draws`` help it generates)

No group imports NumPy or the rest of the library at module level (``privpost --help`` stays
fast; ``tests/test_startup_imports.py``).
"""

from __future__ import annotations

# importing a group registers its commands; the order of these lines is the order of --help
from privpost.cli import release  # noqa: F401,I001
from privpost.cli import infer  # noqa: F401
from privpost.cli import budget  # noqa: F401
from privpost.cli import penalty  # noqa: F401
from privpost.cli import demo  # noqa: F401
from privpost.cli import cells, compositional, experiments, methods
from privpost.cli._common import app, handles_errors, out

__all__ = ["app", "main"]

experiments.register(app, handles_errors, out)
cells.register(app, handles_errors, out)
compositional.register(app, handles_errors, out)
methods.register(app, handles_errors, out)


def main() -> None:  # pragma: no cover - console entry point
    """The ``privpost`` console script: run the command, then exit; after a command that left
    no file open (``infer``), without the interpreter's teardown (:mod:`privpost.cli._exit`)."""
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    from privpost.cli._exit import finish

    finish(code)


if __name__ == "__main__":  # pragma: no cover
    main()
