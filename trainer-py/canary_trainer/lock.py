"""Exclusive `flock` locks that record their holder's pid.

* FolderLock, on an output folder: a worker can be killed while its trainer child keeps running;
  a retry must not start a second trainer writing the same checkpoints and scores.
* The base-model cache locks `<key>.lock` so that concurrent trainers build one base once.

The kernel drops an flock when its holder dies, so a lock is never stale.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Callable

from .errors import FolderBusy, Interrupted

DEFAULT_WAIT_S = 60.0
POLL_S = 0.2


class FileLock:
    """`wait_s` None waits as long as the holder holds (the holder is making progress); a number
    gives up after that many seconds with FolderBusy."""

    def __init__(self, path: Path, wait_s: float | None, what: str):
        self.path = path
        self.wait_s = wait_s
        self.what = what  # "this output folder", for messages
        self.fd: int | None = None

    def acquire(self, on_wait: Callable[[str], None] | None = None, stop=None) -> None:
        """Take the lock. `on_wait(holder_pid)` is called once if another process holds it; `stop`
        (a StopFlag) ends the wait early with Interrupted: nothing was done, so nothing is lost."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not announced and on_wait is not None:
                    on_wait(self._holder(fd))
                    announced = True
                if stop:
                    os.close(fd)
                    raise Interrupted(f"{self.path}: stopped ({stop.reason}) while waiting for the lock; nothing "
                                      "was done; rerun or resume later") from None
                if deadline is not None and time.monotonic() >= deadline:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise FolderBusy(f"{self.path}: another trainer (pid {holder}) holds {self.what}; "
                                     f"waited {self.wait_s:g} s; fix: stop that trainer or wait for it, then retry") from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            return os.pread(fd, 32, 0).decode().strip() or "unknown"
        except OSError:
            return "unknown"

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
        env = os.environ.get("CANARY_TRAINER_LOCK_WAIT_S")
        super().__init__(folder / ".lock", wait_s if wait_s is not None else float(env) if env else DEFAULT_WAIT_S,
                         "this output folder")
