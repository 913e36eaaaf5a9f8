"""DA-MCMC chains on the compiled driver in threads of this process (issue 13 item 4).

The compiled chain driver (:func:`privpost.inference._damcmc_fast._drive`) is compiled with
``nogil=True``: while a chain advances, the GIL is released and another thread can advance
another chain on the other core. Running the chains of a compiled-driver run in threads instead
of worker processes keeps what processes cost a small job -- starting and shutting down the pool
(fork), re-building the problem and re-checking the compiled functions in every worker, pickling
the model, release and results both ways, and the round-trip of a run-until-converged decision
through a queue and a polling loop -- while giving the same parallel speed-up once the chains
run (each chain owns its arrays and its ``numpy.random.Generator``; the compiled model and
query functions only read their closed-over hyperparameters).

The draws are those of :func:`privpost.inference.damcmc._run_here` (every chain has its own
stream, and a chain's draws do not depend on how its iterations are cut into blocks), so the
same seed gives the same draws whatever the number of threads. The generic (NumPy) path keeps
worker processes: its Python code holds the GIL.
"""

from __future__ import annotations

import threading

#: How often (s) the main thread wakes to refresh the progress bar and to notice Ctrl-C while the
#: chains run. Chains check the stop flag between blocks of about ``damcmc._BLOCK_SECONDS``.
_POLL_SECONDS = 0.05
#: After Ctrl-C, how long (s) to wait for a thread to finish its current block (every wait has a
#: timeout; the threads are daemons, so a stuck one cannot keep the interpreter alive).
_JOIN_TIMEOUT = 60.0


def run_threads(chains, names, total, progress, plan, workers, *, round_robin, next_round,
                progress_bar, chain_result):
    """Advance the chains of a compiled-driver run in ``workers`` threads.

    The chain machinery is passed in by :func:`privpost.inference.damcmc.run` (this module
    imports nothing of damcmc: it sits below it).

    Parameters
    ----------
    chains : list of privpost.inference._damcmc_fast.CompiledChain
        The run's chains, made by ``damcmc._make_chains`` (the driver must be the ``nogil``
        one); length ``C``.
    names : list of str
        The parameter names (``damcmc._Problem.names``), for the until-converged decision.
    total : int
        Iterations per chain of the first round (``warmup + draws * thin``).
    progress : bool
        Show the progress bar.
    plan : privpost.inference._until.Plan or None
        Run until converged: decides after each round, in this thread, from every chain's
        draws; ``None`` runs one round.
    workers : int
        Threads; chain ``c`` runs in thread ``c % workers`` (``2 <= workers <= C``).
    round_robin, next_round, progress_bar, chain_result
        damcmc's ``_round_robin(chains, report, should_stop)`` (advances chains in blocks),
        ``_next_round(plan, chains, names, bar) -> bool``, ``_Progress(enabled, total, chains)``
        and ``_chain_result(chain) -> (chain id, result, max drift)``.

    Returns
    -------
    (list of (chain, result dict, max drift), bool)
        As ``damcmc._run_here``: each chain's results, and whether Ctrl-C stopped the run.
    """
    groups = [chains[w::workers] for w in range(workers)]
    chains[0].advance(0)    # load the driver here, before the threads call it (no iterations)
    done = [0] * len(chains)
    stop = threading.Event()
    timed_out = plan.out_of_time if plan is not None else (lambda: False)
    errors: list[BaseException] = []

    def should_stop() -> bool:
        return stop.is_set() or timed_out()

    def report(c, it):
        done[c] = it

    def work(group):
        try:
            round_robin(group, report, should_stop)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
            stop.set()

    interrupted = False
    with progress_bar(progress, total * len(chains), len(chains)) as bar:
        threads: list[threading.Thread] = []
        try:
            while True:
                threads = [threading.Thread(target=work, args=(g,), daemon=True,
                                            name=f"privpost-damcmc-{w}")
                           for w, g in enumerate(groups)]
                for t in threads:
                    t.start()
                for t in threads:
                    while t.is_alive():
                        t.join(_POLL_SECONDS)
                        bar.update(sum(done))
                bar.update(sum(done))
                if errors:
                    raise errors[0]
                if not next_round(plan, chains, names, bar):
                    break
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            for t in threads:
                if t.ident is not None:
                    t.join(_JOIN_TIMEOUT)   # each returns after its current block (~0.1 s)
    return [chain_result(ch) for ch in chains], interrupted
