"""Stop requests: SIGTERM/SIGINT, or the death of the process that started the trainer.

Either one only raises a flag; the training loop finishes the current update, writes a checkpoint
and exits with INTERRUPTED, so `--resume` loses nothing. The parent watch matters because a worker
killed with SIGKILL cannot forward a signal to its child: the child notices its parent changed.
"""

from __future__ import annotations

import os
import signal
import threading

from .host import host


class StopFlag:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()


def install(flag: StopFlag, poll_s: float = 0.5) -> None:
    """Route SIGTERM/SIGINT to `flag`, and watch the parent unless CANARY_TRAINER_PARENT_WATCH=0
    (for a trainer started by hand with nohup, whose shell may exit on purpose)."""

    def on_signal(signum: int, _frame: object) -> None:
        flag.set(f"received {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if not host().parent_watch:
        return
    parent = os.getppid()

    def watch() -> None:
        while not flag._event.wait(poll_s):
            if os.getppid() != parent:
                flag.set(f"parent process {parent} exited")
                return

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
