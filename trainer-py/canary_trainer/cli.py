"""Command line: `python -m canary_trainer run --manifest M --out DIR [--resume] [--force]`.

stdout carries only progress events; every exit other than 0 is preceded by an `error` event.
Host settings come from the environment, never the manifest:
  CANARY_TRAINER_THREADS      CPU threads for torch (default: torch's own choice)
  CANARY_TRAINER_MICRO_BATCH  rows per forward pass (default: the whole batch)
  CANARY_TRAINER_LOCK_WAIT_S  seconds to wait for another trainer's folder lock (default 60)
  CANARY_TRAINER_PARENT_WATCH 0 disables the stop when the parent process dies (default 1)
  CANARY_TRAINER_CACHE        cache of pretrained tiny bases (default ~/.cache/canary-audit)
  CANARY_SCHEMAS_DIR          folder of the JSON Schemas (default: <trainer-py>/../schemas)
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn, TextIO

from . import exit_codes
from .errors import DiskFull, OutOfMemory, TrainerError, is_disk_full, is_oom
from .events import Events, log
from .host import host


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, events: Events, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._events = events

    def error(self, message: str) -> NoReturn:  # argparse would exit 2 without an event
        self.print_usage(sys.stderr)
        self._events.emit("error", kind="bad_manifest", message=f"command line: {message}", recoverable=False)
        sys.exit(exit_codes.BAD_INPUT)


def _parser(events: Events) -> argparse.ArgumentParser:
    p = _Parser(prog="python -m canary_trainer", description="canary-audit trainer", events=events)
    sub = p.add_subparsers(dest="command", required=True, parser_class=lambda **kw: _Parser(events=events, **kw))  # type: ignore[call-overload]
    r = sub.add_parser("run", help="train and evaluate one run manifest")
    r.add_argument("--manifest", required=True, type=Path, help="the run's manifest.json")
    r.add_argument("--out", required=True, type=Path, help="output folder (result.json, scores/, checkpoints/)")
    r.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint")
    r.add_argument("--force", action="store_true", help="rerun even when result.json already holds this manifest's result")
    return p


def _configure_threads() -> None:
    threads = host().threads
    if threads is not None:
        import torch

        torch.set_num_threads(max(1, int(threads)))
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass


def _claim_stdout() -> Events:
    """Keep the real stdout for events only: anything else that writes to it (a library's print, a
    C extension) is sent to stderr, so it cannot corrupt the protocol."""
    stream: TextIO
    try:
        sys.stdout.flush()
        stream = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    except (OSError, ValueError):  # no real file descriptors (embedded use): write where we can
        stream = sys.stdout
    if host().rank != 0:
        # One rank of a sharded run (distributed.py): progress comes from rank 0 only.
        stream = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    return Events(stream=stream)


def main(argv: list[str] | None = None) -> int:
    events = _claim_stdout()
    args = _parser(events).parse_args(argv)
    try:
        from .interrupt import StopFlag, install
        from .run import RunOptions, run

        _configure_threads()
        stop = StopFlag()
        install(stop)
        run(RunOptions(manifest=args.manifest, out=args.out, resume=args.resume, force=args.force,
                       events=events, stop=stop))
        return exit_codes.OK
    except TrainerError as exc:
        return _fail(events, exc)
    except ImportError as exc:
        return _fail(events, TrainerError(f"cannot import {exc.name or exc}: {exc}; fix: install the trainer's "
                                          "dependencies", kind="missing_dependency",
                                          exit_code=exit_codes.MISSING_MODEL, recoverable=False))
    except BaseException as exc:  # noqa: BLE001 - every exit must be explained by an event
        if is_disk_full(exc):
            return _fail(events, disk_full(exc, args.out))
        if is_oom(exc):
            return _fail(events, OutOfMemory(f"out of memory: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
                                             "fix: lower training.batch_size, set CANARY_TRAINER_MICRO_BATCH, or use "
                                             "a smaller model or LoRA"))
        if isinstance(exc, SystemExit):
            raise
        traceback.print_exc(file=sys.stderr)
        return _fail(events, TrainerError(f"internal error: {type(exc).__name__}: {exc}"))


def disk_full(exc: BaseException, out: Path) -> DiskFull:
    where = getattr(exc, "filename", None) or out
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DiskFull(f"disk full: no space left to write {where} ({first}); fix: free space on the disk that holds "
                    f"{out} (df -h {out}), then retry the run: it resumes from its newest intact checkpoint")


def _fail(events: Events, exc: TrainerError) -> int:
    log(f"error ({exc.kind}): {exc.message}")
    events.emit("error", kind=exc.kind, message=exc.message, recoverable=exc.recoverable)
    return exc.exit_code
