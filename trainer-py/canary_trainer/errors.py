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


class BadManifest(TrainerError):
    kind = "bad_manifest"
    exit_code = exit_codes.BAD_INPUT
    recoverable = False


class BadRows(TrainerError):
    kind = "bad_rows"
    exit_code = exit_codes.BAD_INPUT
    recoverable = False


class Diverged(TrainerError):
    kind = "diverged"
    exit_code = exit_codes.DIVERGED
    recoverable = False


class OutOfMemory(TrainerError):
    kind = "oom"
    exit_code = exit_codes.OOM
    recoverable = False


class MissingModel(TrainerError):
    kind = "missing_model"
    exit_code = exit_codes.MISSING_MODEL
    recoverable = False


class MissingDependency(TrainerError):
    kind = "missing_dependency"
    exit_code = exit_codes.MISSING_MODEL
    recoverable = False


class Interrupted(TrainerError):
    """SIGTERM/SIGINT or the parent process died: state is checkpointed, `--resume` continues."""

    kind = "interrupted"
    exit_code = exit_codes.INTERRUPTED
    recoverable = True


class FolderBusy(TrainerError):
    """Another trainer holds the output folder's lock; nothing was done, a later try can succeed."""

    kind = "internal"
    exit_code = exit_codes.BUSY
    recoverable = True


class DiskFull(TrainerError):
    """No space left where the run writes: retrying on the same disk cannot help until space is
    freed, so the run fails for good with the path (the newest intact checkpoint stays for a retry)."""

    kind = "disk_full"
    exit_code = exit_codes.FAILURE
    recoverable = False


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
