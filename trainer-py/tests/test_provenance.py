"""Trainer provenance stamps: schema-valid, sensitive to the code that ran."""

import shutil

from jsonschema import Draft202012Validator

from canary_trainer import provenance, schemas


def test_stamp_satisfies_the_stamp_schema():
    s = provenance.stamp({"model_revision": "abc"})
    stamp_schema = schemas.load_schema("stamp")
    Draft202012Validator({**stamp_schema, "$ref": "#/$defs/stamp"}).validate(s)
    assert s["component"] == "trainer" and s["versions"]["torch"] and s["versions"]["model_revision"] == "abc"
    prov = provenance.finish(s, {"model_revision": "abc"})
    Draft202012Validator({**stamp_schema, "$ref": "#/$defs/provenance"}).validate(prov)
    assert prov["changed_mid_run"] is False


def test_code_hash_follows_the_source(tmp_path, monkeypatch):
    pkg = tmp_path / "trainer-py" / "canary_trainer"
    shutil.copytree(provenance.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "PACKAGE_DIR", pkg)
    monkeypatch.setattr(provenance, "TRAINER_DIR", pkg.parent)
    before = provenance.code_sha256()
    assert before == provenance.code_sha256()
    (pkg / "schedule.py").write_text((pkg / "schedule.py").read_text() + "\n# edited\n")
    assert provenance.code_sha256() != before
    (pkg / "notes.txt").write_text("not code")
    after = provenance.code_sha256()
    (pkg / "notes.txt").write_text("still not code")
    assert provenance.code_sha256() == after


def test_differ_ignores_time_and_host():
    a = provenance.stamp()
    b = {**a, "time": "2030-01-01T00:00:00.000Z", "host": "elsewhere"}
    assert not provenance.differ(a, b)
    assert provenance.differ(a, {**a, "git_dirty": not a["git_dirty"]})  # whatever the checkout state
    assert provenance.differ(a, {**a, "versions": {**a["versions"], "torch": "0.0"}})


def test_numerics_name_the_floating_point_path(monkeypatch):
    import torch

    schema = schemas.load_schema("result")["properties"]["numerics"]
    n = provenance.numerics("cpu", "float32")
    Draft202012Validator(schema).validate(n)
    assert n["threads"] == torch.get_num_threads() and n["device"] == "cpu" and n["dtype"] == "float32"
    assert n["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert n["deterministic_algorithms"] == torch.are_deterministic_algorithms_enabled()
    if not torch.cuda.is_available():
        assert n["gpu_count"] == 0 and n["gpu_model"] is None and n["cuda_version"] is None
    # The thread count it records is the one torch computes with.
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert provenance.numerics("cpu", "float32")["threads"] == 1
    finally:
        torch.set_num_threads(before)
