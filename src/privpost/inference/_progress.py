"""One progress display for every method: a Rich bar like damcmc's, for loops that report
``update(i)`` after iteration ``i`` (gibbs-ss, nonprivate) or finish at once (naive)."""

from __future__ import annotations

import time

__all__ = ["ProgressBar"]


class ProgressBar:
    """Rich progress bar ``<label> <description> [bar] done/total iterations elapsed eta``.

    Started on the first :meth:`update`, stopped when the last iteration is reported (or by
    :meth:`close`, or when the object is collected after an interruption). Redraws at most
    every 0.1 s, so calling :meth:`update` every iteration costs little.
    """

    def __init__(self, total: int, enabled: bool, label: str, description: str = "",
                 close_at_total: bool = True):
        self.total = max(int(total), 1)
        self.close_at_total = close_at_total     # False: the caller closes (rounds may follow)
        self.enabled = bool(enabled)
        self.label = label
        self.description = description
        self._bar = None
        self._last = 0.0

    def _start(self) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._bar = Progress(TextColumn(f"[bold]{self.label}[/bold] {{task.description}}"),
                             BarColumn(), MofNCompleteColumn(), TextColumn("iterations"),
                             TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                             transient=False, auto_refresh=False)
        self._task = self._bar.add_task(self.description, total=self.total)
        self._bar.start()

    def update(self, i: int) -> None:
        """Iteration ``i`` (0-based) is done."""
        if not self.enabled:
            return
        if self._bar is None:
            self._start()
        done = min(int(i) + 1, self.total)
        now = time.perf_counter()
        if done >= self.total or now - self._last >= 0.1:
            self._bar.update(self._task, completed=done)
            self._bar.refresh()
            self._last = now
        if done >= self.total and self.close_at_total:
            self.close()

    def retotal(self, total: int, description: str) -> None:
        """A new total and description (run until converged: the next round, the worst ESS
        and R-hat so far)."""
        self.total = max(int(total), 1)
        self.description = description
        if self._bar is not None:
            self._bar.update(self._task, total=self.total, description=description)
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.stop()

    def __del__(self):  # an interrupted loop still restores the terminal
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass
