"""A symlinked output folder must not lead the trainer's writes (and deletes) out of the run folder."""

import pytest

from canary_trainer.errors import BadManifest
from canary_trainer.out_path import check_output_folder


@pytest.fixture()
def run_dir(tmp_path):
    run = tmp_path / "root" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    return run


def test_a_plain_output_folder_is_fine_whether_it_exists_or_not(run_dir):
    assert check_output_folder(run_dir / "output", run_dir / "manifest.json") == run_dir / "output"
    (run_dir / "output" / "scores").mkdir(parents=True)
    assert check_output_folder(run_dir / "output", run_dir / "manifest.json") == run_dir / "output"


def test_output_symlinked_out_of_the_run_folder_is_refused(run_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / "output").symlink_to(elsewhere)
    with pytest.raises(BadManifest, match="leads outside the run folder"):
        check_output_folder(run_dir / "output", run_dir / "manifest.json")


def test_a_symlink_inside_the_output_folder_that_leads_out_is_refused(run_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / "output" / "scores").mkdir(parents=True)
    (run_dir / "output" / "scores" / "final").symlink_to(elsewhere)
    with pytest.raises(BadManifest, match="scores/final: a symlink in the output folder"):
        check_output_folder(run_dir / "output", run_dir / "manifest.json")


def test_an_output_folder_named_by_hand_elsewhere_is_taken_as_given(run_dir, tmp_path):
    mine = tmp_path / "my-out"
    assert check_output_folder(mine, run_dir / "manifest.json") == mine
    (mine / "checkpoints").mkdir(parents=True)
    (mine / "checkpoints" / "x").symlink_to(tmp_path)
    with pytest.raises(BadManifest):
        check_output_folder(mine, run_dir / "manifest.json")


def test_the_trainer_refuses_a_symlinked_output_before_writing_anything(tmp_path):
    from .conftest import run_cli
    from .fixtures import make_run

    manifest = make_run(tmp_path / "root" / "runs" / "r1")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "scores").mkdir(parents=True)
    (elsewhere / "scores" / "keep.bin").write_bytes(b"x")
    (manifest.parent / "output").symlink_to(elsewhere)
    done = run_cli(manifest, manifest.parent / "output")
    assert done.rc == 2, done.stderr
    assert "leads outside the run folder" in done.stderr
    assert (elsewhere / "scores" / "keep.bin").read_bytes() == b"x"  # nothing deleted there
    assert not (elsewhere / "result.json").exists()
