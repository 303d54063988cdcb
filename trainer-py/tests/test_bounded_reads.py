"""Every file the trainer reads from a run folder goes through one bound (canary_trainer/bounded.py):
opened once without following a final link or waiting on a FIFO, a regular file, a size bound, before
a byte is read. One test per file and case: a link to /dev/zero (read whole, it grows the process
without end; hashed, it never ends), a FIFO (an open that waits forever) and a file over its bound.

Each case runs in a forked child with a few seconds and a memory ceiling, so the unbounded reads the
tests guard against fail the test (timeout, MemoryError) instead of hanging or swapping the machine."""

from __future__ import annotations

import json
import os
import resource
import signal
from pathlib import Path
from typing import Callable

import pytest
import torch

from canary_trainer import checkpoint
from canary_trainer.bounded import MAX_JSON_BYTES, MAX_ROWS_BYTES, BoundError, open_bounded, read_bounded
from canary_trainer.errors import BadManifest, BadRows
from canary_trainer.manifest import load_manifest
from canary_trainer.rows import check_lines
from canary_trainer.run import _finished

from .fixtures import make_run

SECONDS = 4


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


class _Timeout(BaseException):
    """Raised by the alarm in the child: not an OSError, so no caller's `except OSError` takes it."""


def in_child(fn: Callable[[], str]) -> str:
    """fn() in a forked child with SECONDS of time and 1 GiB of address space over the parent's:
    its return value, 'raised <Type>: <message>', or 'timeout' / 'killed'."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + (1 << 30), resource.RLIM_INFINITY))

            def alarm(_signum: int, _frame: object) -> None:
                raise _Timeout()

            signal.signal(signal.SIGALRM, alarm)
            signal.alarm(SECONDS)
            try:
                out = fn()
            except _Timeout:
                out = "timeout"
            except BaseException as exc:  # noqa: BLE001 - every outcome is reported to the parent
                out = f"raised {type(exc).__name__}: {exc}"
            signal.alarm(0)
            os.write(write_end, out.encode("utf-8", "replace")[: 1 << 16])
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8")
    return text if text else f"killed (wait status {status})"


def _zero(file: Path) -> None:
    file.unlink(missing_ok=True)
    file.symlink_to("/dev/zero")


def _fifo(file: Path) -> None:
    file.unlink(missing_ok=True)
    os.mkfifo(file)


def _oversized(limit: int) -> Callable[[Path], None]:
    def make(file: Path) -> None:
        file.unlink(missing_ok=True)
        with open(file, "wb") as f:
            f.truncate(limit + 1)  # sparse: no disk used

    return make


CASES = {
    "link to /dev/zero": (_zero, "is a symlink"),
    "FIFO": (_fifo, "is a FIFO (named pipe), not a regular file"),
}


# ---- the bound itself ------------------------------------------------------------------------------

def test_read_bounded_reads_a_regular_file_and_refuses_growth(tmp_path):
    f = tmp_path / "a.json"
    f.write_bytes(b"x" * 100)
    assert read_bounded(f, 100) == b"x" * 100
    with pytest.raises(BoundError, match="holds 100 bytes, over the bound of 99 bytes"):
        read_bounded(f, 99)
    with open_bounded(f, 100) as stream:
        f.write_bytes(b"x" * 200)  # the same inode grows after the fstat
        with pytest.raises(BoundError, match="grew past the bound of 100 bytes"):
            stream.read()


# ---- manifest.json ----------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_manifest_link_or_fifo_is_refused(tmp_path, case):
    manifest = make_run(tmp_path)
    make, phrase = CASES[case]
    make(manifest)

    def load() -> str:
        try:
            load_manifest(manifest)
        except BadManifest as exc:
            return str(exc)
        return "loaded"

    out = in_child(load)
    assert f"manifest.json: cannot read the manifest ({phrase}" in out, out


def test_manifest_over_its_bound_is_refused_before_reading(tmp_path):
    manifest = make_run(tmp_path)
    _oversized(MAX_JSON_BYTES)(manifest)

    def load() -> str:
        try:
            load_manifest(manifest)
        except BadManifest as exc:
            return str(exc)
        return "loaded"

    out = in_child(load)
    assert f"holds {MAX_JSON_BYTES + 1} bytes, over the bound of {MAX_JSON_BYTES} bytes" in out, out


# ---- rows files ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [*sorted(CASES), "oversized"])
def test_rows_file_link_fifo_or_oversized_is_refused(tmp_path, case):
    manifest = make_run(tmp_path)
    rows = json.loads(manifest.read_text())["rows"]
    file = tmp_path / rows["path"]
    make, phrase = CASES.get(case, (_oversized(MAX_ROWS_BYTES), f"holds {MAX_ROWS_BYTES + 1} bytes, over the bound"))
    make(file)

    def check() -> str:
        try:
            check_lines(file, rows["sha256"], rows["count"], "rows")
        except BadRows as exc:
            return str(exc)
        return "read"

    out = in_child(check)
    assert f"cannot read rows ({phrase}" in out, out


# ---- result.json --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_result_link_or_fifo_is_not_taken_as_a_finished_run(tmp_path, case):
    manifest = load_manifest(make_run(tmp_path))
    out_dir = tmp_path / "output"
    out_dir.mkdir()
    CASES[case][0](out_dir / "result.json")
    assert in_child(lambda: repr(_finished(out_dir, manifest))) == "False"


# ---- checkpoints --------------------------------------------------------------------------------------

def _checkpoint(root: Path) -> Path:
    meta = {"manifest_sha256": "m", "run_id": "r"}
    return checkpoint.save(root, 5, {"a": torch.arange(4096, dtype=torch.float32)}, {"state": {}},
                           checkpoint.rng_state(), meta)


def _skipped(root: Path) -> str:
    skipped: list = []
    found = checkpoint.load_newest(root, "m", skipped)
    return json.dumps({"loaded": found is not None, "skipped": skipped})


def test_checkpoint_records_sizes_and_an_intact_one_loads(tmp_path):
    path = _checkpoint(tmp_path)
    recorded = json.loads((path / "hashes.json").read_text())
    assert recorded["bytes"] == {name: (path / name).stat().st_size for name in recorded["sha256"]}
    assert json.loads(in_child(lambda: _skipped(tmp_path))) == {"loaded": True, "skipped": []}


@pytest.mark.parametrize("name", ["weights.pt", "optimizer.pt", "meta.json", "hashes.json"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_checkpoint_file_link_or_fifo_is_skipped_with_its_reason(tmp_path, name, case):
    path = _checkpoint(tmp_path)
    make, phrase = CASES[case]
    make(path / name)
    out = in_child(lambda: _skipped(tmp_path))
    got = json.loads(out) if out.startswith("{") else out
    assert isinstance(got, dict), got
    assert got["loaded"] is False
    assert len(got["skipped"]) == 1 and f"{name} {phrase}" in got["skipped"][0]["reason"], got


@pytest.mark.parametrize("name", ["weights.pt", "optimizer.pt"])
def test_checkpoint_file_larger_than_recorded_is_skipped_before_hashing(tmp_path, name):
    path = _checkpoint(tmp_path)
    size = (path / name).stat().st_size
    _oversized(size + (1 << 34))(path / name)  # 16 GiB more, sparse: hashing it would take minutes
    out = in_child(lambda: _skipped(tmp_path))
    got = json.loads(out) if out.startswith("{") else out
    assert isinstance(got, dict), got
    assert f"{name} holds {size + (1 << 34) + 1} bytes, over the bound of {size} bytes" in got["skipped"][0]["reason"]


# ---- the shared cache: a base's cached scores --------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_cached_base_scores_link_or_fifo_is_a_cache_miss(tmp_path, case):
    from canary_trainer import base_eval

    (tmp_path / "k.json").write_text(json.dumps({"n_candidates": 3, "scores_sha256": "0" * 64}))
    CASES[case][0](tmp_path / "k.f32")
    assert in_child(lambda: repr(base_eval._load(tmp_path, "k"))) == "None"
