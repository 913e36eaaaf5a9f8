"""Releases and everything that makes or loads one.

* :mod:`~privpost.releases.release` -- the :class:`Release` (query + calibrated mechanism + noisy
  values) and :class:`ReleaseSet` objects, their JSON documents (``privpost.release/1``,
  ``privpost.release-set/1``: ``save`` / ``load`` through one size-limited reader), and
  :func:`release` (the curator's side: records -> a release). ``pp.release``, ``pp.Release`` and
  ``pp.ReleaseSet`` are these.
* :mod:`~privpost.releases.declaration` -- :func:`declare`: a release from statistics published
  elsewhere (``pp.declare``).
* :mod:`~privpost.releases.census` -- census-style noisy measurement files -> a ReleaseSet
  (``pp.census``).
* :mod:`~privpost.releases.interop` -- releases made by OpenDP, PipelineDP, diffprivlib ->
  privpost releases (``pp.from_opendp`` ...; ``pp.interop``).
* :mod:`~privpost.releases.dpss` -- the DPss two-part release of compositional records (seed 002):
  :func:`~privpost.releases.dpss.dpss_release` makes one, :func:`~privpost.releases.dpss.parse_dpss`
  checks a loaded set is one.
* :mod:`~privpost.releases.budget` -- splitting a privacy budget across several releases of the
  same records.

Every module here imports only :mod:`privpost.queries`, :mod:`privpost.mechanisms`,
:mod:`privpost.accounting` and the helpers below them (``tests/test_import_layers.py``). The
attributes below are imported on first use, so that importing one loader does not import the rest.
"""

from __future__ import annotations

from privpost._lazy import lazy_package

_ATTRS = {
    "Release": ("privpost.releases.release", "Release"),
    "ReleaseSet": ("privpost.releases.release", "ReleaseSet"),
    "declare": ("privpost.releases.declaration", "declare"),
    "dpss_release": ("privpost.releases.dpss", "dpss_release"),
    "parse_dpss": ("privpost.releases.dpss", "parse_dpss"),
    "split_budget": ("privpost.releases.budget", "split_budget"),
    "read_census": ("privpost.releases.census", "read_census"),
}

__all__ = sorted(_ATTRS)

lazy_package(__name__, _ATTRS, {"release", "declaration", "census", "interop", "dpss", "budget"})
