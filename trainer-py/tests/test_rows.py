"""Rows files: the manifest's sha256 and count are checked before use; every failure names the
file and line and ends in an error event with exit 2."""

import hashlib
import json

import pytest

from canary_trainer.errors import BadRows
from canary_trainer.rows import read_rows

from .conftest import run_cli
from .fixtures import make_run, rewrite_manifest


def _write(path, lines):
    data = "".join(lines).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _row(i, **extra):
    return json.dumps({"i": i, "kind": "background", "prompt": [{"role": "user", "content": "x"}], "target": "y",
                       **extra}) + "\n"


def test_reads_valid_rows(tmp_path):
    sha = _write(tmp_path / "r.jsonl", [_row(0), _row(1)])
    assert [r["i"] for r in read_rows(tmp_path / "r.jsonl", sha, 2, "rows")] == [0, 1]


@pytest.mark.parametrize("lines, count, pattern", [
    ([_row(0), _row(2)], 2, r"r.jsonl:2:1: field i: 2 but this is row 1"),
    ([_row(0), "{not json\n"], 2, r"r.jsonl:2:2: not valid JSON"),
    ([_row(0), _row(1, target="")], 2, r"r.jsonl:2:1: field target"),
    ([_row(0)], 2, r"1 lines but the manifest's rows.count is 2"),
])
def test_bad_rows_name_file_and_line(tmp_path, lines, count, pattern):
    sha = _write(tmp_path / "r.jsonl", lines)
    with pytest.raises(BadRows, match=pattern):
        read_rows(tmp_path / "r.jsonl", sha, count, "rows")


def test_sha_mismatch_is_an_error_event(tmp_path):
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2)
    rows = tmp_path / "run" / "rows.jsonl"
    rows.write_text(rows.read_text().replace("Regards", "Cheers"))
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == 2
    err = res.of("error")[-1]
    assert err["kind"] == "bad_rows" and "sha256" in err["message"] and "rows.sha256" in err["message"]
    assert not res.of("step") and not (tmp_path / "out" / "result.json").exists()


def test_unreadable_rows_is_an_error_event(tmp_path):
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2)
    (tmp_path / "run" / "rows.jsonl").unlink()
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == 2
    err = res.of("error")[-1]
    assert err["kind"] == "bad_rows" and "cannot read rows" in err["message"]


def test_row_longer_than_max_length_is_never_truncated(tmp_path):
    manifest = rewrite_manifest(make_run(tmp_path / "run", updates=2, batch_size=2),
                                lambda d: d["training"].update(max_length=40))
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == 2
    assert "exceed training.max_length 40" in res.of("error")[-1]["message"]
    assert "rows.jsonl:1:1 (row 0)" in res.of("error")[-1]["message"]
