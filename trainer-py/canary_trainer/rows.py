"""Read a rows file (rows.jsonl or utility.jsonl) named by the manifest: check its sha256 and line
count first (the controller's promise), then each row against schemas/row.schema.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from . import schemas
from .bounded import MAX_ROWS_BYTES, BoundError, read_bounded
from .errors import BadRows


def check_lines(path: Path, sha256: str, count: int, label: str) -> list[str]:
    """The file's lines after checking its sha256 and line count against the manifest: cheap, so
    a run can check a file it may not need to parse (a cached base's pretraining rows)."""
    try:
        raw = read_bounded(path, MAX_ROWS_BYTES)
    except BoundError as exc:
        raise BadRows(f"{path}: cannot read {label} ({exc}); fix: re-plan the run so the file is the one the "
                      "controller wrote") from exc
    except OSError as exc:
        raise BadRows(f"{path}: cannot read {label} ({exc.strerror}); fix: re-plan the run so the file exists") from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha256:
        raise BadRows(f"{path}: sha256 {digest} differs from the manifest's {label}.sha256 {sha256}; "
                      "fix: the file changed after planning: re-plan the run")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRows(f"{path}: not UTF-8 at byte {exc.start}; fix: write rows as UTF-8 JSON lines") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != count:
        raise BadRows(f"{path}: {len(lines)} lines but the manifest's {label}.count is {count}; "
                      "fix: re-plan the run")
    return lines


def read_rows(path: Path, sha256: str, count: int, label: str) -> list[dict]:
    lines = check_lines(path, sha256, count, label)
    check = schemas.validator("row")
    rows = []
    for n, line in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadRows(f"{path}:{n + 1}:{exc.colno}: not valid JSON ({exc.msg}); fix: one JSON object per line") from exc
        if not check.is_valid(row):
            problem = schemas.first_error("row", row)
            raise BadRows(f"{path}:{n + 1}:1: {problem}; fix: make each row satisfy schemas/row.schema.json")
        if row["i"] != n:
            raise BadRows(f"{path}:{n + 1}:1: field i: {row['i']} but this is row {n}; "
                          "fix: rows must be listed in training order with i == line index")
        rows.append(row)
    return rows
