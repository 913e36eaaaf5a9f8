"""The entry point of ``method="damcmc"`` for every model but the HMM (registry route):
choose the latent (DESIGN §10) and the release's shape, then run.

* the (model, query) pair has an exact count table and ``latent`` allows it: the count-level
  sampler (:mod:`privpost.inference._count_latent`), the table's law built once;
* a :class:`~privpost.ReleaseSet` of the same records: its releases stacked into one problem
  (:func:`privpost.inference.joint.joint_problem`), then :func:`privpost.inference.damcmc.run`;
* otherwise :func:`privpost.inference.damcmc.run` on the records, after the resource limits
  (:func:`privpost.limits.check_inference`).

Options are damcmc's (checked by the registry before this runs)."""

from __future__ import annotations

__all__ = ["run"]


def run(model, release, **options):
    """``damcmc`` on ``(model, release)`` with ``damcmc.run``'s keyword ``options``."""
    from privpost.inference import damcmc
    from privpost.inference._count_latent import law_for_options, run_with_options
    from privpost.limits import check_inference
    from privpost.releases.release import ReleaseSet

    law = law_for_options(model, release, options)
    if law is not None:                                         # the count table (§10)
        check_inference(model, release, "damcmc", options, records=False)
        return run_with_options(law, model, release, options)   # the law built once
    if isinstance(release, ReleaseSet):  # a release set of the same records: stacked
        from privpost.inference.joint import joint_problem

        model, release = joint_problem(model, release)
        return damcmc.run(model, release, **options)
    check_inference(model, release, "damcmc", options)   # resource limits, before allocation
    return damcmc.run(model, release, **options)

