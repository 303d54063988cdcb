"""Progress protocol (schemas/progress.schema.json): one JSON object per stdout line, flushed.

stdout carries nothing else. When the reader of stdout is gone (the worker was killed), writes fail
with EPIPE; the run must still be able to checkpoint and exit, so such failures are swallowed.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Callable, TextIO

PROTOCOL_VERSION = 1


def _clean(value: Any) -> Any:
    # JSON has no NaN/inf and json.dumps would emit invalid tokens; a non-finite value becomes null.
    # (A non-finite loss never reaches a step event: it ends the run with a diverged error first.)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


class Events:
    """Writes progress events. `stream` replaces stdout (tests); `observer` sees every event."""

    def __init__(self, stream: TextIO | None = None, observer: Callable[[dict], None] | None = None):
        self.stream = stream if stream is not None else sys.stdout
        self.observer = observer
        self.broken = False

    def emit(self, event: str, **fields: Any) -> dict:
        record = {"v": PROTOCOL_VERSION, "event": event, "t": round(time.time(), 3)}
        record.update({k: v for k, v in fields.items() if v is not None or k == "resumed_from"})
        record = _clean(record)
        if self.observer is not None:
            self.observer(record)
        if not self.broken:
            try:
                self.stream.write(json.dumps(record, separators=(",", ":")) + "\n")
                self.stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True
        return record


def log(message: str) -> None:
    """Human-readable diagnostics go to stderr; a closed stderr must not crash the run either."""
    try:
        sys.stderr.write(f"[canary_trainer {os.getpid()}] {message}\n")
        sys.stderr.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
