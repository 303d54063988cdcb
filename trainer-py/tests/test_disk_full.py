"""A full disk under the run's output folder is a named, final failure (kind disk_full, the path and
the fix in the message), not an internal error the worker would retry."""

import errno
import subprocess
import tempfile

import pytest

from canary_trainer import exit_codes
from canary_trainer.errors import is_disk_full

from .conftest import run_cli
from .fixtures import make_run


def test_torch_and_os_disk_full_errors_are_recognised():
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device", "/x/result.json"))
    assert is_disk_full(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1600 vs 1488"))
    assert is_disk_full(RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"))
    assert not is_disk_full(RuntimeError("CUDA out of memory"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))


@pytest.fixture
def small_disk():
    mnt = tempfile.mkdtemp(prefix="canary-full-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", mnt], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], check=True)


def test_full_output_disk_fails_for_good_with_the_path(tmp_path, small_disk):
    manifest = make_run(tmp_path / "run", updates=6, batch_size=2, length=3, checkpoint_every=2, n_focal=1, n_held=1,
                        tiny={"n_layer": 2, "n_head": 2, "d_model": 64, "max_len": 256})
    out = f"{small_disk}/out"
    r = run_cli(manifest, out)
    assert r.rc == exit_codes.FAILURE, r.stderr
    err = r.of("error")[-1]
    assert err["kind"] == "disk_full" and err["recoverable"] is False
    assert f"df -h {out}" in err["message"] and "internal error" not in err["message"]
