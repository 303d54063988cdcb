"""Artifacts written atomically take the umask's mode like every other file (one policy for a
shared store), not mkstemp's private 0600."""

import os

from canary_trainer.atomic import write_dir_atomic, write_json_atomic


def test_files_and_folders_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "result.json", {"x": 1})
        write_dir_atomic(tmp_path / "scores", lambda d: (d / "f.f32").write_bytes(b"\0"))
        os.umask(0o002)
        write_json_atomic(tmp_path / "shared.json", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "result.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "scores").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o664
