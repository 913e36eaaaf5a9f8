"""Suite-wide seed offset and the ``statistical`` mark (DESIGN.md §12; tests/_seed_offset.py).

``PRIVPOST_TEST_SEED_OFFSET=k`` (default 0: nothing changes) moves every seed of the run to an
independent stream, in this process and in its worker processes and subprocesses.
``make test-seeds`` runs ``-m statistical`` at several offsets.
"""

from __future__ import annotations

import os

import pytest

import _seed_offset
import _tolerance

OFFSET = _seed_offset.offset()
_seed_offset.install(OFFSET)
if OFFSET:
    _site = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_seed_site")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_site, os.environ.get("PYTHONPATH", "")) if p)

#: Modules whose tests compare random output with a reference under a Monte Carlo tolerance
#: (tests/_tolerance.py: K_MCSE). ``make test-seeds`` runs these at several offsets.
STATISTICAL_MODULES = {
    "test_calibration", "test_cgm_checks", "test_compare", "test_compiled_more_moves",
    "test_compositional_ellipsoid", "test_compositional_methods", "test_compositional_release",
    "test_cells_noisy_sizes", "test_count_collapsed", "test_count_margins", "test_count_moves",
    "test_count_occupied", "test_count_sweep", "test_covariate_learned",
    "test_covariate_notes", "test_damcmc", "test_damcmc_compiled_interweave",
    "test_damcmc_counts", "test_dpremcmc_moves",
    "test_damcmc_counts_tables", "test_hmm_counts", "test_hmm_shift", "test_hmm_sizes",
    "test_hmm_split", "test_interop", "test_hmc_step",
    "test_damcmc_discrete_interweave",
    "test_damcmc_interweave", "test_damcmc_more_interweave", "test_damcmc_normal_interweave",
    "test_damcmc_until", "test_dirichlet_compiled_move", "test_dpapprox_until",
    "test_extreme_releases", "test_gibbs_ss", "test_gibbs_ss_regression", "test_hmm",
    "test_hmm_until", "test_joint_releases", "test_mechanisms", "test_models", "test_mrf",
    "test_mrf_compiled", "test_naive_ops", "test_p5_prior_until", "test_penalty",
    "test_predictive", "test_randomized_response",
    "test_count_mrf_loopy", "test_mrf_kernel", "test_declare", "test_hostile_inputs",
    "test_noise_cancellation",
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


# ---------------------------------------------------------------------------------------------
# Counting the Monte Carlo checks (tests/_tolerance.py: N_CHECKS); on with
# PRIVPOST_TEST_COUNT_CHECKS=1 (``make test-seeds``). A check is counted where its Monte Carlo
# error or p-value is computed from a test file: each ``arviz.ess`` call (and privpost's
# ``diagnostics.ess_bulk / ess_mean / mcse_mean / mcse_sd``), each entry of an
# ``arviz.mcse`` result, each KS / chi-square / binomial test, plus
# ``_tolerance.count_checks(k)`` for the
# few checks whose standard error is a closed form.

_COUNT = _tolerance.COUNT
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def _install_check_counter():
    import sys

    import arviz
    import numpy as np
    from scipy import stats

    def wrap(mod, name, size):
        f = getattr(mod, name)

        def counted(*a, **kw):
            out = f(*a, **kw)
            if sys._getframe(1).f_code.co_filename.startswith(_TESTS_DIR):
                _COUNT["n"] += size(out)
            return out

        counted.__wrapped__ = f
        setattr(mod, name, counted)

    def entries(out):
        if hasattr(out, "data_vars"):
            return sum(int(np.size(out[v].values)) for v in out.data_vars)
        return int(np.size(out))

    wrap(arviz, "ess", entries)
    wrap(arviz, "mcse", entries)
    from privpost import diagnostics

    for name in ("ess_bulk", "ess_mean", "mcse_mean", "mcse_sd"):
        wrap(diagnostics, name, entries)
    for name in ("kstest", "ks_1samp", "ks_2samp", "chisquare", "binomtest", "cramervonmises",
                 "cramervonmises_2samp", "anderson_ksamp"):
        wrap(stats, name, lambda out: 1)


if os.environ.get("PRIVPOST_TEST_COUNT_CHECKS", "").strip() not in ("", "0"):
    _install_check_counter()

    def pytest_terminal_summary(terminalreporter, exitstatus, config):
        from _tolerance import K_MCSE, N_CHECKS, P_CHECK, UNCOUNTED

        n = _COUNT["n"] + UNCOUNTED
        terminalreporter.write_line(
            f"Monte Carlo checks in this run: {_COUNT['n']} counted + {UNCOUNTED} estimated "
            f"(budget N_CHECKS = {N_CHECKS}, "
            f"K_MCSE = {K_MCSE}, P_CHECK = {P_CHECK:.2g})", red=n > N_CHECKS, bold=True)

    def pytest_sessionfinish(session, exitstatus):
        from _tolerance import N_CHECKS, UNCOUNTED

        if _COUNT["n"] + UNCOUNTED > N_CHECKS and session.exitstatus == 0:
            session.exitstatus = 1
