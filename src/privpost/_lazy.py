"""Lazy package attributes, for start-up time (``privpost --help`` should not import NumPy/SciPy).

A package ``__init__`` lists ``{attribute: (module, name)}`` and calls :func:`lazy_package`; the
attributes are imported on first access (PEP 562 module ``__getattr__``).

Some packages expose a *function* with the same name as one of their submodules
(the function ``privpost.experiments.reproduce`` lives in the module
``privpost.experiments.reproduce``). On a submodule's first import, Python binds the
submodule as an attribute of its package, which would replace the function. The package's module
class is therefore swapped for one whose ``__setattr__`` binds the function instead, whichever of
``import privpost.experiments.reproduce`` / ``privpost.experiments.reproduce(...)`` comes first.
The submodule itself stays reachable as ``sys.modules["privpost.experiments.reproduce"]``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Callable, Iterable


def lazy_package(package: str, attrs: dict[str, "tuple[str, str] | Callable[[], object]"],
                 submodules: Iterable[str] = (), shadowed: Iterable[str] = ()) -> None:
    """Install lazy attributes (module ``__getattr__`` and ``__dir__``) on the package ``package``.

    Parameters
    ----------
    package : str
        ``__name__`` of the package.
    attrs : dict
        ``{attribute: (module, name)}``: ``package.attribute`` is ``module.name``, imported on
        first access; or ``{attribute: function}``: the value is ``function()``.
    submodules : iterable of str
        Submodule names ``package.<name>`` that are imported on first attribute access.
    shadowed : iterable of str
        Submodule names that are also the name of a function inside that submodule (the
        function wins, see the module docstring).
    """
    mod = sys.modules[package]
    subs = frozenset(submodules)
    shadow = frozenset(shadowed)

    def __getattr__(name: str):
        if name in attrs and callable(attrs[name]):
            value = attrs[name]()
        elif name in attrs:
            module, attr = attrs[name]
            value = getattr(importlib.import_module(module), attr)
        elif name in subs:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        mod.__dict__[name] = value
        return value

    def __dir__():
        return sorted(set(mod.__dict__) | set(attrs) | subs)

    mod.__dict__["__getattr__"] = __getattr__
    mod.__dict__["__dir__"] = __dir__
    if shadow:
        class _Package(types.ModuleType):
            def __setattr__(self, name, value):
                if name in shadow and isinstance(value, types.ModuleType):
                    value = getattr(value, name)    # bind the function, not its module
                super().__setattr__(name, value)

        mod.__class__ = _Package
