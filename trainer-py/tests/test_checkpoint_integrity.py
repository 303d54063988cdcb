"""Checkpoint integrity: every checkpoint carries the sha256 of its files (hashes.json, written
last). A checkpoint changed or cut short after it was written is never resumed from: the run falls
back to the previous intact checkpoint (or starts again), says so in its started event, on stderr
and in result.json, and ends with the numbers of a run that was never interrupted."""

import json
import shutil
import signal

import pytest
import torch

from canary_trainer import checkpoint
from canary_trainer.checkpoint import checkpoint_dir, list_updates

from .conftest import run_cli
from .test_resume import UPDATES, _same_outputs, _stop_at_checkpoint


def _flip_middle(path, n=16):
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_save_writes_hashes_and_verify_catches_flipped_and_cut_files(tmp_path):
    w = {"a": torch.arange(4096, dtype=torch.float32)}
    meta = {"manifest_sha256": "m", "run_id": "r"}
    path = checkpoint.save(tmp_path, 5, w, {"state": {}}, checkpoint.rng_state(), meta)
    recorded = json.loads((path / "hashes.json").read_text())["sha256"]
    assert sorted(recorded) == ["meta.json", "optimizer.pt", "weights.pt"]
    assert checkpoint.verify(path) is None
    _flip_middle(path / "weights.pt")
    # the flipped file still loads: only the hash tells
    assert set(torch.load(path / "weights.pt")) == {"a"}
    assert "weights.pt changed after it was written" in checkpoint.verify(path)
    skipped: list = []
    assert checkpoint.load_newest(tmp_path, "m", skipped) is None
    assert skipped == [{"update": 5, "reason": checkpoint.verify(path)}]


def test_missing_hashes_is_not_resumed_from(tmp_path):
    path = checkpoint.save(tmp_path, 5, {"a": torch.zeros(2)}, {}, checkpoint.rng_state(), {"manifest_sha256": "m"})
    (path / "hashes.json").unlink()
    skipped: list = []
    assert checkpoint.load_newest(tmp_path, "m", skipped) is None
    assert "hashes.json is missing" in skipped[0]["reason"]


@pytest.fixture(scope="module")
def reference(resume_reference):
    """One manifest and its uninterrupted run (conftest), shared by the tests below."""
    return resume_reference


@pytest.fixture(scope="module")
def killed(reference, tmp_path_factory):
    """The reference manifest's run killed (SIGKILL) after its checkpoint at update 20, run once;
    each test damages and resumes its own copy of the folder."""
    manifest, _ = reference
    out = tmp_path_factory.mktemp("killed") / "out"
    rc, _ = _stop_at_checkpoint(manifest, out, signal.SIGKILL, 20)
    assert rc == -signal.SIGKILL
    updates = list_updates(out)
    assert len(updates) == 2 and updates[1] < UPDATES
    return out, updates


def _interrupted(reference, killed, tmp_path, name):
    manifest, _ = reference
    out = tmp_path / name
    shutil.copytree(killed[0], out)
    assert list_updates(out) == killed[1]
    return manifest, out, killed[1]


def _check_fallback(reference, manifest, out, newest, damage, expect_from):
    damage(checkpoint_dir(out, newest) / "weights.pt")
    resumed = run_cli(manifest, out, "--resume")
    assert resumed.rc == 0, resumed.stderr
    start = resumed.of("started")[0]
    assert start["resumed_from"] == expect_from
    skipped = start["checkpoints_skipped"]
    assert skipped[0]["update"] == newest and "weights.pt" in skipped[0]["reason"]
    assert f"warning: checkpoint update {newest} not resumed from" in resumed.stderr
    ra, rb = _same_outputs(reference[1], out)
    assert ra["training"]["checkpoints_skipped"] == []
    assert rb["training"]["checkpoints_skipped"] == skipped
    return rb


def test_flipped_newest_weights_fall_back_to_the_previous_checkpoint(reference, killed, tmp_path):
    manifest, out, (previous, newest) = _interrupted(reference, killed, tmp_path, "flipped")
    _check_fallback(reference, manifest, out, newest, _flip_middle, previous)


def test_truncated_newest_weights_fall_back_with_a_warning(reference, killed, tmp_path):
    manifest, out, (previous, newest) = _interrupted(reference, killed, tmp_path, "cut")
    _check_fallback(reference, manifest, out, newest, _truncate, previous)


def test_every_checkpoint_damaged_starts_again_and_says_so(reference, killed, tmp_path):
    manifest, out, (previous, newest) = _interrupted(reference, killed, tmp_path, "both")
    _flip_middle(checkpoint_dir(out, previous) / "optimizer.pt")
    rb = _check_fallback(reference, manifest, out, newest, _flip_middle, None)
    assert [s["update"] for s in rb["training"]["checkpoints_skipped"]] == [newest, previous]

