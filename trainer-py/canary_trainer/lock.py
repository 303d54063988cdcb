"""Exclusive `flock` locks that record their holder's pid.

* FolderLock, on an output folder: a worker can be killed while its trainer child keeps running;
  a retry must not start a second trainer writing the same checkpoints and scores.
* The base-model cache locks `<key>.lock` so that concurrent trainers build one base once.

The kernel drops an flock when its holder dies, so a lock is never stale. The lock file holds the
holder's pid on its first line and, when the holder gave one, a label (its run id) on the second:
a waiting trainer can say whom it waits for.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Callable, NamedTuple

from .errors import FolderBusy, Interrupted
from .host import host
from .interrupt import StopFlag

DEFAULT_WAIT_S = 60.0
POLL_S = 0.2


class Holder(NamedTuple):
    """Who holds a lock, as its lock file says: `pid` ("unknown" when unreadable) and `label`."""

    pid: str
    label: str | None


class FileLock:
    """`wait_s` None waits as long as the holder holds (the holder is making progress); a number
    gives up after that many seconds with FolderBusy. `label` (a run id) is written beside the pid."""

    def __init__(self, path: Path, wait_s: float | None, what: str, label: str | None = None):
        self.path = path
        self.wait_s = wait_s
        self.what = what  # "this output folder", for messages
        self.label = label
        self.fd: int | None = None
        self.waited = False  # whether the last acquire had to wait for another holder

    def acquire(self, on_wait: Callable[[Holder], None] | None = None, stop: StopFlag | None = None) -> None:
        """Take the lock. `on_wait(holder)` is called when another process holds it, and again each
        time the holder changes (another waiter took it first); `stop` (a StopFlag) ends the wait
        early with Interrupted: nothing was done, so nothing is lost."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
        announced: Holder | None = None
        self.waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                self.waited = True
                holder = self._holder_record(fd)
                # A holder between its truncate and its write reads as unknown: not a new holder.
                if on_wait is not None and (announced is None or (holder != announced and holder.pid != "unknown")):
                    on_wait(holder)
                    announced = holder
                if stop:
                    os.close(fd)
                    raise Interrupted(f"{self.path}: stopped ({stop.reason}) while waiting for the lock; nothing "
                                      "was done; rerun or resume later") from None
                if deadline is not None and time.monotonic() >= deadline:
                    pid = self._holder_record(fd).pid
                    os.close(fd)
                    raise FolderBusy(f"{self.path}: another trainer (pid {pid}) holds {self.what}; "
                                     f"waited {self.wait_s:g} s; fix: stop that trainer or wait for it, then retry") from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (f"{os.getpid()}\n" + (f"{self.label}\n" if self.label else "")).encode(), 0)
        self.fd = fd

    @staticmethod
    def _holder_record(fd: int) -> Holder:
        try:
            lines = os.pread(fd, 512, 0).decode(errors="replace").splitlines()
        except OSError:
            return Holder("unknown", None)
        pid = lines[0].strip() if lines else ""
        label = lines[1].strip() if len(lines) > 1 else ""
        return Holder(pid or "unknown", label or None)

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


class FolderLock(FileLock):
    """`<folder>/.lock`, waiting CANARY_TRAINER_LOCK_WAIT_S (default 60 s) for another trainer."""

    def __init__(self, folder: Path, wait_s: float | None = None):
        env = host().lock_wait_s
        super().__init__(folder / ".lock", wait_s if wait_s is not None else env if env is not None else DEFAULT_WAIT_S,
                         "this output folder")
