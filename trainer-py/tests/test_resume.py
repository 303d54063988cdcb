"""Interruption and resume: a run killed mid-way (SIGKILL) or stopped (SIGTERM) and resumed ends
with the same weights and the same scores, bit for bit, as a run that was never interrupted."""

import json
import os
import signal

import torch

from canary_trainer import exit_codes
from canary_trainer.checkpoint import checkpoint_dir, list_updates, record_hashes

from .conftest import run_cli, run_here, start_cli
from .fixtures import make_run

UPDATES = 30


def _manifest(tmp_path):
    return make_run(tmp_path / "run", updates=UPDATES, batch_size=2, length=3, checkpoint_every=5, n_focal=1,
                    n_held=1, kinds=("hidden", "supplied"), eval_checkpoints=[20], base_model=True,
                    tiny={"n_layer": 2, "n_head": 2, "d_model": 48, "max_len": 256, "dropout": 0.1})


def _stop_at_checkpoint(manifest, out, sig, at_update, env=None):
    proc = start_cli(manifest, out, env=env)
    events = []
    for line in proc.stdout:
        events.append(json.loads(line))
        if events[-1]["event"] == "checkpoint" and events[-1]["update"] == at_update:
            os.kill(proc.pid, sig)
            break
    rest, _ = proc.communicate(timeout=120)
    events += [json.loads(x) for x in rest.splitlines() if x.strip()]
    return proc.returncode, events


def _same_outputs(a, b):
    wa = torch.load(checkpoint_dir(a, UPDATES) / "weights.pt")
    wb = torch.load(checkpoint_dir(b, UPDATES) / "weights.pt")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    ra, rb = (json.loads((d / "result.json").read_text()) for d in (a, b))
    assert ra["training"]["loss_curve"] == rb["training"]["loss_curve"]
    for ea, eb in zip(ra["evaluations"], rb["evaluations"], strict=True):
        assert ea["phase"] == eb["phase"]
        for pa, pb in zip(ea["probes"], eb["probes"], strict=True):
            assert pa["scores_sha256"] == pb["scores_sha256"] and pa["greedy"] == pb["greedy"]
            assert (a / pa["scores_file"]).read_bytes() == (b / pb["scores_file"]).read_bytes()
    return ra, rb


def test_kill_9_then_resume_equals_uninterrupted(resume_reference, tmp_path):
    manifest, straight = resume_reference
    broken = tmp_path / "broken"
    rc, events = _stop_at_checkpoint(manifest, broken, signal.SIGKILL, 10)
    assert rc == -signal.SIGKILL
    assert not (broken / "result.json").exists()
    assert list_updates(broken) and max(list_updates(broken)) < UPDATES

    resumed = run_cli(manifest, broken, "--resume")
    assert resumed.rc == 0, resumed.stderr
    start = resumed.of("started")[0]
    assert start["resumed_from"] is not None and 10 <= start["resumed_from"] < UPDATES
    assert resumed.of("step")[0]["update"] == start["resumed_from"] + 1
    _, rb = _same_outputs(straight, broken)
    assert rb["training"]["resumed_from"] == start["resumed_from"]
    # the base phase was not recomputed: it came from the checkpoint
    assert not [e for e in resumed.of("eval") if e["phase"] == "base"]
    assert len(list_updates(broken)) == 2  # only the newest two checkpoints are kept


def test_sigterm_checkpoints_and_exits_75_then_resumes(resume_reference, tmp_path):
    manifest, straight = resume_reference
    stopped = tmp_path / "stopped"
    rc, events = _stop_at_checkpoint(manifest, stopped, signal.SIGTERM, 5)
    assert rc == exit_codes.INTERRUPTED
    err = events[-1]
    assert err["event"] == "error" and err["kind"] == "interrupted" and err["recoverable"] is True
    last_step = [e for e in events if e["event"] == "step"][-1]["update"]
    assert events[-2] == {**events[-2], "event": "checkpoint", "update": last_step}
    assert last_step < UPDATES and max(list_updates(stopped)) == last_step

    resumed = run_here(manifest, stopped, resume=True)
    assert resumed.of("started")[0]["resumed_from"] == last_step
    _same_outputs(straight, stopped)


def test_resume_keeps_the_first_start_stamp(tmp_path):
    """A resumed run is stamped at its first start; different code at write is changed_mid_run."""
    manifest = make_run(tmp_path / "run", updates=4, batch_size=2, length=2, checkpoint_every=2, n_focal=1,
                        n_held=0, kinds=("hidden",))
    out = tmp_path / "out"
    rc, _ = _stop_at_checkpoint(manifest, out, signal.SIGTERM, 2)
    assert rc == exit_codes.INTERRUPTED
    newest = checkpoint_dir(out, max(list_updates(out)))
    meta = json.loads((newest / "meta.json").read_text())
    meta["at_start"]["code_sha256"] = "f" * 64  # as if the trainer's code changed in between
    (newest / "meta.json").write_text(json.dumps(meta))
    record_hashes(newest)  # a checkpoint that other code wrote, intact: resumed from
    run_here(manifest, out, resume=True)
    prov = json.loads((out / "result.json").read_text())["provenance"]
    assert prov["at_start"]["code_sha256"] == "f" * 64
    assert prov["changed_mid_run"] is True


def test_fresh_start_ignores_old_checkpoints(tmp_path):
    manifest = make_run(tmp_path / "run", updates=4, batch_size=2, length=2, checkpoint_every=2, n_focal=1,
                        n_held=0, kinds=("hidden",))
    out = tmp_path / "out"
    rc, _ = _stop_at_checkpoint(manifest, out, signal.SIGTERM, 2)
    assert rc == exit_codes.INTERRUPTED
    res = run_cli(manifest, out)  # no --resume: start over
    assert res.rc == 0 and res.of("started")[0]["resumed_from"] is None
    assert [e["update"] for e in res.of("step")] == [1, 2, 3, 4]
