"""Suite-wide seed offset and the ``statistical`` mark (DESIGN.md §12; tests/_seed_offset.py).

``PRIVPOST_TEST_SEED_OFFSET=k`` (default 0: nothing changes) moves every seed of the run to an
independent stream, in this process and in its worker processes and subprocesses.
``make test-seeds`` runs ``-m statistical`` at several offsets.
"""

from __future__ import annotations

import os

import pytest

import _seed_offset

OFFSET = _seed_offset.offset()
_seed_offset.install(OFFSET)
if OFFSET:
    _site = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_seed_site")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_site, os.environ.get("PYTHONPATH", "")) if p)

#: Modules whose tests compare random output with a reference under a Monte Carlo tolerance
#: (tests/_stat.py: K_MCSE). ``make test-seeds`` runs these at several offsets.
STATISTICAL_MODULES = {
    "test_calibration", "test_cgm_checks", "test_compare", "test_compiled_more_moves",
    "test_compositional_ellipsoid", "test_compositional_methods", "test_compositional_release",
    "test_damcmc", "test_damcmc_compiled_interweave", "test_damcmc_discrete_interweave",
    "test_damcmc_interweave", "test_damcmc_more_interweave", "test_damcmc_normal_interweave",
    "test_damcmc_until", "test_dirichlet_compiled_move", "test_dpapprox_until",
    "test_extreme_releases", "test_gibbs_ss", "test_gibbs_ss_regression", "test_hmm",
    "test_hmm_until", "test_joint_releases", "test_mechanisms", "test_models", "test_mrf",
    "test_mrf_compiled", "test_naive_ops", "test_p5_prior_until", "test_penalty",
    "test_predictive", "test_randomized_response",
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "statistical: compares random output with a reference under a Monte Carlo "
                   "tolerance; `make test-seeds` runs these at several seed offsets")


def pytest_report_header(config):
    return f"seed offset: {_seed_offset.ENV}={OFFSET}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        mod = getattr(item, "module", None)
        if mod is not None and mod.__name__ in STATISTICAL_MODULES:
            item.add_marker(pytest.mark.statistical)
