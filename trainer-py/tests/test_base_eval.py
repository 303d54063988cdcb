"""The base model's evaluation phase is computed once per audit: a second run with the same base
reuses the probes it shares with the first (same bytes, hard-linked from the shared cache), and
evaluates only its new probes; the result equals a run with an empty cache."""

import json
import os

from .conftest import run_here
from .fixtures import make_run

MODEL = {"backend": "tiny", "name": "tiny-test", "init_seed": 7,
         "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256}}


def _run(tmp_path, name, n_focal, cache):
    manifest = make_run(tmp_path / name, updates=2, batch_size=2, length=2, n_focal=n_focal, n_held=1,
                        base_model=True, model=MODEL, max_new_tokens=8)
    out = tmp_path / name / "out"
    res = run_here(manifest, out, CANARY_TRAINER_CACHE=str(cache))
    result = json.loads((out / "result.json").read_text())
    base = next(e for e in result["evaluations"] if e["phase"] == "base")
    return out, base, res.stderr


def _probes(folder):
    return json.loads((folder / "manifest.json").read_text())["probes"]


def test_base_phase_is_shared_across_runs(tmp_path):
    cache = tmp_path / "cache"
    out_a, base_a, _ = _run(tmp_path, "a", 1, cache)
    out_b, base_b, log_b = _run(tmp_path, "b", 2, cache)
    seen = {json.dumps([p["prompt"], p["prefill"]]) for p in _probes(tmp_path / "a")}
    shared_ids = {p["id"] for p in _probes(tmp_path / "b") if json.dumps([p["prompt"], p["prefill"]]) in seen}
    shared = [p for p in base_b["probes"] if p["probe_id"] in shared_ids]
    assert any(p["canary_id"] == "f000" for p in shared) and len(shared) < len(base_b["probes"])
    assert f"{len(shared)} of {len(base_b['probes'])} probes from the shared cache" in log_b
    by_id = {p["probe_id"]: p for p in base_a["probes"]}
    for p in shared:
        assert p == by_id[p["probe_id"]]
        a, b = (os.stat(o / p["scores_file"]) for o in (out_a, out_b))
        assert a.st_ino == b.st_ino  # one file, linked into both runs
    _, fresh, log_c = _run(tmp_path, "c", 2, tmp_path / "empty-cache")
    assert "0 of" in log_c
    assert fresh["probes"] == base_b["probes"]
