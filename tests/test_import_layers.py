"""The package's import graph has no cycles, and its top level is the declared list (issue 25).

"A module imports downwards only." The walk reads every module of ``src/privpost`` with ``ast``
(nothing is imported or run) and records each import of another privpost module, in two kinds:

* **module-level**: executed when the module is imported (top level, class bodies, ``if`` /
  ``try`` blocks at top level; ``if TYPE_CHECKING:`` blocks are skipped);
* **function-level** ("lazy"): inside a function or method, executed when it is called.

Decision: **lazy imports count.** A cycle made of module-level imports is the defect that breaks
import order (a half-initialised module); a cycle through a lazy import is the same mutual
dependency, only deferred (the two modules cannot be understood, tested or moved one without the
other). Both kinds must be acyclic: :func:`test_no_module_level_import_cycle` and
:func:`test_no_import_cycle_counting_lazy_imports`. A lazy back-edge that must stay would be
declared in :data:`KNOWN_LAZY_BACK_EDGES` with why (none is); a declared edge that has gone fails
too, so the list only shrinks.

Edges: ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``
(``a/b/__init__.py`` for a package); ``import a.b`` is an edge to ``a.b``. The implicit import of
a module's parent packages is not an edge (Python runs a package's ``__init__`` before any of its
submodules; a submodule that imports *names* from its own package's ``__init__`` is an explicit
upward edge and counts). Imports made at run time from strings (the lazy attribute tables of
``privpost.__init__`` and ``privpost.models``, ``inference.METHODS``, the registry's
``"module:Class"`` checks) are not seen; those tables point downwards by construction.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "privpost"

#: What the package's top level may hold: the modules of the public objects, the sub-packages
#: and the private helpers below them. A new top-level module must be added here (or, better, go
#: into the sub-package of its family).
ALLOWED_TOP_LEVEL = {
    "__init__.py": "the lazy public API (privpost.__all__)",
    "py.typed": "PEP 561 marker",
    # sub-packages
    "queries": "one module per query kind, QUERIES, query_from_dict",
    "releases": "Release / ReleaseSet and every maker and loader of one (declare, census, "
                "interop importers, DPss, budget splits)",
    "models": "models (prior + record simulator + updates), one module per family",
    "inference": "methods (privpost.infer and one module per method family)",
    "cli": "the privpost command, one module per command group",
    "experiments": "calibration and the papers' reproductions",
    # public objects' modules
    "mechanisms.py": "Mechanism classes (pp.mechanisms)",
    "accounting.py": "Privacy and composition (pp.accounting)",
    "posterior.py": "Posterior (pp.Posterior)",
    "diagnostics.py": "R-hat / ESS / MCSE of posteriors",
    "predictive.py": "Posterior.predictive: posterior predictive replicates of a release",
    "names.py": "Posterior.axes: parameter names read from the release",
    "answers.py": "answers to questions about a posterior (MRF / HMM probabilities, plots)",
    "compare.py": "compare: every method on one release",
    "errors.py": "PrivpostError and its subclasses",
    "limits.py": "Limits: the bounds every input is checked against",
    "io.py": "reading records from CSV / Parquet (pp.io)",
    "demo.py": "the end-to-end demo (pp.demo)",
    # private helpers at the bottom of the graph
    "_lazy.py": "lazy package attributes (start-up time)",
    "_rng.py": "seeds -> Generators",
    "_numba_cache.py": "Numba's on-disk cache dropped when a source changed (package import)",
    "_ndtri.py": "normal quantile without SciPy (diagnostics)",
    "_netcdf.py": "Posterior.to_netcdf through h5netcdf",
    "_samplers.py": "exact integer noise samplers (mechanisms)",
    "_analytic_gaussian.py": "the analytic Gaussian curve (mechanisms, _gaussian_composition)",
    "_gaussian_composition.py": "k adaptive Gaussian mechanisms (re-exported by accounting)",
    "_diagnostics_batch.py": "ESS / R-hat for many entries at once (diagnostics)",
    "_cli_warnings.py": "warnings collected once per command (cli, calibration workers)",
}

#: Lazy (function-level) imports that still close a cycle, each ``(importer, imported): why``.
#: Module-level back-edges are never allowed. None is left (the last ones, _threads -> damcmc and
#: models._count_tables -> the model modules, were removed by passing the pieces down).
KNOWN_LAZY_BACK_EDGES: dict[tuple[str, str], str] = {}


def _module_names(package_dir: Path) -> dict[str, Path]:
    """``{dotted module name: path}`` of every ``.py`` file below ``package_dir``."""
    root = package_dir.parent
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules) -> str | None:
    """The module ``name`` stands for: itself if it is one, else its longest module prefix."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(package_dir: Path) -> dict[str, dict[str, set[str]]]:
    """``{"module": {importer: {imported, ...}}, "function": {...}}`` for the package at
    ``package_dir`` (imports of modules outside it are ignored)."""
    modules = _module_names(package_dir)
    edges: dict[str, dict[str, set[str]]] = {"module": {}, "function": {}}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

        def add(kind: str, target: str | None) -> None:
            if target is not None and target != name:
                edges[kind].setdefault(name, set()).add(target)

        def visit(node: ast.AST, kind: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                k = "function" if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.Lambda)) else kind
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        add(k, _resolve(alias.name, modules))
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = package.split(".")
                        base = base[:len(base) - (child.level - 1)]
                        mod = ".".join(base + ([child.module] if child.module else []))
                    else:
                        mod = child.module or ""
                    for alias in child.names:
                        add(k, _resolve(f"{mod}.{alias.name}", modules))
                visit(child, k)

        visit(tree, "module")
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def _describe(comps, graph) -> str:
    lines = []
    for comp in comps:
        members = set(comp)
        lines.append(" <-> ".join(comp))
        for a in comp:
            for b in sorted(graph.get(a, set()) & members):
                lines.append(f"    {a} -> {b}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def edges():
    return import_edges(PACKAGE)


def test_the_walk_sees_the_package_imports(edges):
    """The walker finds known edges of both kinds (a walker that found nothing would pass the
    cycle tests vacuously)."""
    assert "privpost.accounting" in edges["module"]["privpost.mechanisms"]
    assert "privpost.queries.base" in edges["module"]["privpost.queries.sums"]
    assert "privpost.cli._common" in edges["module"]["privpost.cli.release"]
    assert "privpost.releases.release" in edges["function"]["privpost.releases.declaration"]
    assert sum(len(v) for v in edges["module"].values()) > 180
    assert sum(len(v) for v in edges["function"].values()) > 200


def test_no_module_level_import_cycle(edges):
    found = cycles(edges["module"])
    assert not found, "module-level import cycles:\n" + _describe(found, edges["module"])


def test_no_import_cycle_counting_lazy_imports(edges):
    graph: dict[str, set[str]] = {}
    for kind in ("module", "function"):
        for a, bs in edges[kind].items():
            graph.setdefault(a, set()).update(bs)
    for a, b in KNOWN_LAZY_BACK_EDGES:
        assert b not in edges["module"].get(a, set()), f"{a} -> {b} is now a module-level import"
        graph.get(a, set()).discard(b)
    found = cycles(graph)
    assert not found, ("import cycles (lazy imports included; see the module docstring):\n"
                       + _describe(found, graph))


def test_known_back_edges_still_exist(edges):
    """A declared back-edge that was removed must leave the list (the list only shrinks)."""
    gone = [e for e in KNOWN_LAZY_BACK_EDGES if e[1] not in edges["function"].get(e[0], set())]
    assert not gone, f"remove from KNOWN_LAZY_BACK_EDGES: {gone}"


def test_top_level_holds_only_the_declared_modules_and_packages():
    listing = {p.name for p in PACKAGE.iterdir()
               if p.name != "__pycache__" and not p.name.endswith(".egg-info")
               and (p.is_dir() or p.suffix in (".py", ".typed"))}
    assert listing == set(ALLOWED_TOP_LEVEL), (
        f"not declared: {sorted(listing - set(ALLOWED_TOP_LEVEL))}; "
        f"declared but absent: {sorted(set(ALLOWED_TOP_LEVEL) - listing)}")
    for sub in (p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (sub / "__init__.py").is_file(), f"{sub.name}/ is not a package"


# ----------------------------------------------------------------------------- wrong variants
def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_a_lazy_cycle_is_found_and_kept_apart_from_module_level(tmp_path):
    pkg = _write(tmp_path, {"__init__.py": "", "a.py": "from pkg import b\n",
                            "b.py": "def f():\n    from pkg.a import x\n"})
    e = import_edges(pkg)
    assert cycles(e["module"]) == []
    both = {k: e["module"].get(k, set()) | e["function"].get(k, set()) for k in ("pkg.a", "pkg.b")}
    assert cycles(both) == [["pkg.a", "pkg.b"]]


def test_a_module_level_cycle_through_a_package_init_is_found(tmp_path):
    """``from pkg.sub import name`` in a submodule of ``pkg.sub`` is an edge to its package's
    ``__init__`` (the old ``queries`` <-> ``cell_counts`` shape)."""
    pkg = _write(tmp_path, {"__init__.py": "", "sub/__init__.py": "from pkg.sub.kind import K\n",
                            "sub/kind.py": "from pkg.sub import helper\n"})
    e = import_edges(pkg)
    assert cycles(e["module"]) == [["pkg.sub", "pkg.sub.kind"]]


def test_type_checking_imports_are_not_edges(tmp_path):
    pkg = _write(tmp_path, {"__init__.py": "", "a.py": "from pkg import b\n",
                            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from pkg import a\n"})
    e = import_edges(pkg)
    assert "pkg.a" not in e["module"].get("pkg.b", set())
