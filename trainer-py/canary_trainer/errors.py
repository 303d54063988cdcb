"""One error type for every way a run can end early. Each maps to a progress `error` event
(kind, message, recoverable) and an exit code, so the worker can decide between retry, resume
and give up without parsing messages."""

from __future__ import annotations

import errno

from . import exit_codes


class TrainerError(Exception):
    """kind is one of the progress schema's error kinds."""

    kind = "internal"
    exit_code = exit_codes.FAILURE
    recoverable = True

    def __init__(self, message: str, *, kind: str | None = None, exit_code: int | None = None,
                 recoverable: bool | None = None):
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind
        if exit_code is not None:
            self.exit_code = exit_code
        if recoverable is not None:
            self.recoverable = recoverable


# Every way a run ends early, one row each: the progress event's kind, the exit code, whether the
# worker may retry (resume) it, and when it happens (tests/test_errors.py holds the table to
# schemas/progress.schema.json's kinds).
class BadManifest(TrainerError):       kind, exit_code, recoverable = "bad_manifest", exit_codes.BAD_INPUT, False  # the manifest or command line is wrong
class BadRows(TrainerError):           kind, exit_code, recoverable = "bad_rows", exit_codes.BAD_INPUT, False  # a rows or image file is wrong
class Diverged(TrainerError):          kind, exit_code, recoverable = "diverged", exit_codes.DIVERGED, False  # NaN, infinite or exploding loss
class OutOfMemory(TrainerError):       kind, exit_code, recoverable = "oom", exit_codes.OOM, False  # the device cannot hold the run
class MissingModel(TrainerError):      kind, exit_code, recoverable = "missing_model", exit_codes.MISSING_MODEL, False  # weights not in the local cache
class MissingDependency(TrainerError): kind, exit_code, recoverable = "missing_dependency", exit_codes.MISSING_MODEL, False  # a package to install
class Interrupted(TrainerError):       kind, exit_code, recoverable = "interrupted", exit_codes.INTERRUPTED, True  # SIGTERM/SIGINT or the parent died: checkpointed, --resume continues
class FolderBusy(TrainerError):        kind, exit_code, recoverable = "internal", exit_codes.BUSY, True  # another trainer holds the output folder's lock; nothing was done
class DiskFull(TrainerError):          kind, exit_code, recoverable = "disk_full", exit_codes.FAILURE, False  # no space where the run writes: a retry on the same disk cannot help until space is freed (the newest intact checkpoint stays)


# torch.save on a full disk: "[enforce fail at inline_container.cc:...] . unexpected pos N vs M" or
# "PytorchStreamWriter failed writing file ...: file write failed".
_DISK_FULL_TEXT = ("no space left on device", "disk quota exceeded", "unexpected pos", "file write failed")


def is_disk_full(exc: BaseException) -> bool:
    for e in (exc, exc.__cause__, exc.__context__):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, OSError)) and any(s in text for s in _DISK_FULL_TEXT)


def is_oom(exc: BaseException) -> bool:
    """torch raises torch.cuda.OutOfMemoryError (2.x) or a RuntimeError naming it (older, CPU)."""
    name = type(exc).__name__
    if name == "OutOfMemoryError":
        return True
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    # CUDA: "CUDA out of memory"; CPU allocator: "can't allocate memory ... (Cannot allocate memory)"
    return isinstance(exc, RuntimeError) and any(
        s in text for s in ("out of memory", "can't allocate memory", "cannot allocate memory"))
