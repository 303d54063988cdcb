"""Exclusive lock on an output folder. A worker can be killed while its trainer child keeps
running; a retry must not start a second trainer writing the same checkpoints and scores."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from .errors import FolderBusy, Interrupted

DEFAULT_WAIT_S = 60.0


class FolderLock:
    def __init__(self, folder: Path, wait_s: float | None = None):
        self.path = folder / ".lock"
        env = os.environ.get("CANARY_TRAINER_LOCK_WAIT_S")
        self.wait_s = wait_s if wait_s is not None else float(env) if env else DEFAULT_WAIT_S
        self.fd: int | None = None

    def acquire(self, on_wait=None, stop=None) -> None:
        """Take the lock, waiting up to wait_s. `stop` (a StopFlag) ends the wait early: a trainer
        told to stop while queued behind another one has nothing to checkpoint."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_s
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
                                      "was done; rerun or resume later")
                if time.monotonic() >= deadline:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise FolderBusy(f"{self.path}: another trainer (pid {holder}) holds this output folder; "
                                     f"waited {self.wait_s:g} s; fix: stop that trainer or wait for it, then retry")
                time.sleep(0.2)
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
