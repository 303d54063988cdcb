"""The tiny backend's pretrained base: built once per key, cached, and bit-for-bit the same whether
this run built it, loaded it, waited for a concurrent trainer to build it, or rebuilt a damaged
file; stops and bad input behave like everywhere else in the trainer."""

import io
import json
import os
import signal
import subprocess
import time

import torch

from canary_trainer import exit_codes, schemas
from canary_trainer.base_model import cache_key, key_material
from canary_trainer.lock import FileLock
from canary_trainer.manifest import load_manifest

from .conftest import PYTHON, run_cli, run_here, start_cli, trainer_env
from .fixtures import make_run, rewrite_manifest

PRETRAIN = {"updates": 12, "batch_size": 4, "lr": 0.01, "schedule": {"kind": "cosine", "warmup_updates": 2}}


def _manifest(tmp_path, **extra):
    kw = dict(updates=6, batch_size=2, length=3, n_focal=1, n_held=1, kinds=("hidden", "substituted"),
              base_model=True, checkpoint_every=2, pretrain=PRETRAIN, decode=("prefill",), max_new_tokens=8,
              tiny={"n_layer": 1, "n_head": 2, "d_model": 32, "max_len": 256, "dropout": 0.1})
    kw.update(extra)
    return make_run(tmp_path / "run", **kw)


def _cache_file(manifest, cache):
    key = cache_key(key_material(load_manifest(manifest), torch.device("cpu"), threads=1))
    return key, cache / "tiny-base" / f"{key}.pt"


def _result(out):
    return json.loads((out / "result.json").read_text())


def _scores(out):
    res = _result(out)
    return {(e["phase"], p["probe_id"]): (out / p["scores_file"]).read_bytes()
            for e in res["evaluations"] for p in e["probes"]}


def _pretrain_steps(events):
    return [e for e in events if e["event"] == "step" and e.get("phase") == "pretrain"]


def test_cache_miss_hit_and_rebuild_give_identical_runs(tmp_path):
    manifest = _manifest(tmp_path)
    cache = tmp_path / "cache"
    env = trainer_env(CANARY_TRAINER_CACHE=str(cache))
    key, cached = _cache_file(manifest, cache)

    miss = run_here(manifest, tmp_path / "miss", CANARY_TRAINER_CACHE=str(cache))  # the CLI's events and log
    for event in miss.events:
        assert schemas.first_error("progress", event) is None, event
    pre = _pretrain_steps(miss.events)
    assert [e["update"] for e in pre] == list(range(1, 13)) and {e["total"] for e in pre} == {12}
    tune = [e for e in miss.of("step") if "phase" not in e]
    assert [e["update"] for e in tune] == list(range(1, 7))
    kinds = [e["event"] for e in miss.events]
    assert kinds[0] == "started" and kinds.index("eval") > kinds.index("step") + 11  # base eval after pretraining
    assert "not cached; pretraining 12 updates" in miss.stderr
    result = _result(tmp_path / "miss")
    assert schemas.first_error("result", result) is None
    base = result["backend"]["base_model"]
    assert base["kind"] == "pretrained" and base["cache_key"] == key and base["from_cache"] is False
    assert base["updates"] == 12 and abs(base["final_loss"] - pre[-1]["loss"]) < 1e-6
    # the base phase and the utility loss were measured on the pretrained base, not on the init
    assert result["utility"]["base_loss"] < pre[0]["loss"] - 0.1
    built = cached.read_bytes()

    # A hit: no pretraining; killed mid-run and resumed, it still equals the miss bit for bit.
    proc = start_cli(manifest, tmp_path / "hit", env=env)
    for line in proc.stdout:
        if json.loads(line)["event"] == "checkpoint":
            proc.send_signal(signal.SIGKILL)
            break
    proc.communicate(timeout=60)
    hit = run_here(manifest, tmp_path / "hit", resume=True, CANARY_TRAINER_CACHE=str(cache))
    assert not _pretrain_steps(hit.events) and "weights come with the checkpoint" in hit.stderr
    loaded = _result(tmp_path / "hit")["backend"]["base_model"]
    assert loaded["from_cache"] is True and loaded["cache_key"] == key
    assert (loaded["final_loss"], loaded["build_wall_s"]) == (base["final_loss"], base["build_wall_s"])
    assert _scores(tmp_path / "hit") == _scores(tmp_path / "miss")
    assert _result(tmp_path / "hit")["utility"] == result["utility"]

    # A damaged cache file is rebuilt, to the same bytes of weights.
    cached.write_bytes(built[: len(built) // 2] + bytes(len(built) - len(built) // 2))
    again = run_here(manifest, tmp_path / "rebuilt", CANARY_TRAINER_CACHE=str(cache))
    assert "is damaged" in again.stderr and len(_pretrain_steps(again.events)) == 12
    assert _result(tmp_path / "rebuilt")["backend"]["base_model"]["from_cache"] is False
    assert _scores(tmp_path / "rebuilt") == _scores(tmp_path / "miss")
    assert torch.load(cached)["digest"] == torch.load(io.BytesIO(built))["digest"]


def _wait_for(path, text, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never said {text!r}: {path.read_text() if path.exists() else ''}")


def _start_logged(manifest, out, env, log):
    return subprocess.Popen([PYTHON, "-m", "canary_trainer", "run", "--manifest", str(manifest), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, env=env)


def _held_base_lock(tmp_path, label=None):
    """A manifest, the trainer env for a fresh cache, the base's cache file, and that base's lock,
    acquired (with `label` as its holder's run id): trainers started now queue behind it."""
    manifest = _manifest(tmp_path)
    cache = tmp_path / "cache"
    env = trainer_env(CANARY_TRAINER_CACHE=str(cache))
    key, cached = _cache_file(manifest, cache)
    gate = FileLock(cache / "tiny-base" / f"{key}.lock", 0, "test", label=label)
    gate.acquire()
    return manifest, env, cached, gate


def test_racing_trainers_build_the_base_once(tmp_path):
    # Hold the key's lock so that both trainers are certainly queued behind it, then let them race.
    manifest, env, cached, gate = _held_base_lock(tmp_path)
    procs = []
    try:
        for name in ("a", "b"):
            procs.append(_start_logged(manifest, tmp_path / name, env, tmp_path / f"{name}.log"))
        for name in ("a", "b"):
            _wait_for(tmp_path / f"{name}.log", f"pid {os.getpid()} is building it; waiting")
    finally:
        gate.release()
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    events = [[json.loads(x) for x in o.splitlines()] for o in outs]
    built = [len(_pretrain_steps(e)) for e in events]
    assert sorted(built) == [0, 12]  # exactly one trainer pretrained
    bases = [_result(tmp_path / n)["backend"]["base_model"] for n in ("a", "b")]
    assert sorted(b["from_cache"] for b in bases) == [False, True]
    assert _scores(tmp_path / "a") == _scores(tmp_path / "b")
    assert cached.exists()


def test_a_waiting_trainer_says_whose_base_it_waits_for(tmp_path):
    # The lock is held as a building trainer holds it (its pid, then its run id): the waiter's
    # progress events name that run while it waits, and say when the wait ended.
    manifest, env, cached, gate = _held_base_lock(tmp_path, label="run-builder0001")
    try:
        proc = _start_logged(manifest, tmp_path / "out", env, tmp_path / "log")
        _wait_for(tmp_path / "log", f"pid {os.getpid()} (run run-builder0001) is building it; waiting")
        time.sleep(0.5)
    finally:
        gate.release()
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    events = [json.loads(x) for x in stdout.splitlines()]
    for event in events:
        assert schemas.first_error("progress", event) is None, event
    waits = [e for e in events if e["event"] == "wait"]
    key, _ = _cache_file(manifest, tmp_path / "cache")
    assert [e["ended"] for e in waits] == [False, True]
    assert waits[0] == {**waits[0], "on": "base_model", "key": key, "holder_pid": os.getpid(), "holder_run": "run-builder0001"}
    assert waits[1]["waited_s"] >= 0.5 and "holder_run" not in waits[1]
    kinds = [e["event"] for e in events]
    # started, then the wait, and only then pretraining (the gate built nothing, so this trainer builds)
    assert kinds.index("started") < kinds.index("wait") and kinds.index("step") > len(kinds) - kinds[::-1].index("wait") - 1
    assert len(_pretrain_steps(events)) == 12 and cached.exists()


def test_stop_while_waiting_for_the_base_exits_75(tmp_path):
    manifest, env, cached, gate = _held_base_lock(tmp_path)
    try:
        proc = _start_logged(manifest, tmp_path / "out", env, tmp_path / "log")
        _wait_for(tmp_path / "log", "is building it; waiting")
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        gate.release()
    assert proc.returncode == exit_codes.INTERRUPTED
    err = [json.loads(x) for x in stdout.splitlines()][-1]
    assert err["event"] == "error" and err["kind"] == "interrupted" and err["recoverable"] is True
    assert not cached.exists() and not (tmp_path / "out" / "result.json").exists()


def test_stop_during_pretraining_exits_75_without_a_cached_base(tmp_path):
    manifest = _manifest(tmp_path, pretrain={**PRETRAIN, "updates": 150})
    cache = tmp_path / "cache"
    env = trainer_env(CANARY_TRAINER_CACHE=str(cache))
    _, cached = _cache_file(manifest, cache)
    proc = start_cli(manifest, tmp_path / "out", env=env)
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if seen[-1].get("phase") == "pretrain" and seen[-1]["update"] == 2:
            proc.send_signal(signal.SIGTERM)
            break
    rest, _ = proc.communicate(timeout=60)
    seen += [json.loads(x) for x in rest.splitlines()]
    assert proc.returncode == exit_codes.INTERRUPTED
    assert seen[-1]["kind"] == "interrupted" and "not checkpointed" in seen[-1]["message"]
    # nothing half-built is kept: the next attempt (a miss) pretrains from update 1
    assert len(_pretrain_steps(seen)) < 150 and not cached.exists()
    assert not (tmp_path / "out" / "checkpoints").exists() and not list(cached.parent.glob("*.tmp"))


def test_bad_pretrain_rows_sha_exits_2_before_any_work(tmp_path):
    manifest = _manifest(tmp_path)
    rewrite_manifest(manifest, lambda d: d["model"]["tiny"]["pretrain"]["rows"].update(sha256="0" * 64))
    cache = tmp_path / "cache"
    res = run_cli(manifest, tmp_path / "out", env=trainer_env(CANARY_TRAINER_CACHE=str(cache)))
    assert res.rc == exit_codes.BAD_INPUT
    assert [e["event"] for e in res.events] == ["error"]
    err = res.events[0]
    assert err["kind"] == "bad_rows" and err["recoverable"] is False
    assert "model.tiny.pretrain.rows.sha256" in err["message"] and "pretrain.jsonl" in err["message"]
    assert not cache.exists()


def test_key_follows_what_the_weights_depend_on(tmp_path):
    manifest = _manifest(tmp_path)
    m = load_manifest(manifest)
    cpu = torch.device("cpu")
    base = cache_key(key_material(m, cpu, threads=1))
    assert base == cache_key(key_material(load_manifest(manifest), cpu, threads=1))
    assert base != cache_key(key_material(m, cpu, threads=2))
    assert base != cache_key(key_material(m, torch.device("cuda", 0), threads=1))

    def key_after(edit):
        rewrite_manifest(manifest, edit)
        return cache_key(key_material(load_manifest(manifest), cpu, threads=1))

    # Fine-tuning settings other than the optimizer's shared ones leave the base alone; each edit
    # below is undone by the next line, so every comparison is against one change.
    assert key_after(lambda d: d["training"].update(lr=0.5, seed=9, max_length=200)) == base
    assert key_after(lambda d: d["training"].update(weight_decay=0.1)) != base
    assert key_after(lambda d: d["training"].update(weight_decay=0) or d["model"].update(init_seed=5)) != base
    assert key_after(lambda d: d["model"].update(init_seed=0) or d["model"]["tiny"].update(dropout=0.2)) != base
    assert key_after(lambda d: d["model"]["tiny"].update(dropout=0.1) or d["model"]["tiny"]["pretrain"].update(lr=0.02)) != base
    assert key_after(lambda d: d["model"]["tiny"]["pretrain"].update(lr=0.01)) == base
    assert key_after(lambda d: d["model"]["tiny"]["pretrain"]["rows"].update(sha256="1" * 64)) != base


def test_a_fixed_base_init_seed_shares_one_base_across_run_seeds(tmp_path):
    """`pretrain.init_seed` initialises the base whatever the run's `model.init_seed`: the key and
    the starting weights follow it, not the run's seed; absent, the run's seed does both."""
    from canary_trainer.backends.tiny import TinyBackend

    manifest = _manifest(tmp_path)
    cpu = torch.device("cpu")

    def state(edit):
        rewrite_manifest(manifest, edit)
        m = load_manifest(manifest)
        weights = TinyBackend(m.model, cpu).model.state_dict()
        return cache_key(key_material(m, cpu, threads=1)), weights

    def same(a, b):
        return a[0] == b[0] and all(torch.equal(a[1][k], b[1][k]) for k in a[1])

    run0 = state(lambda d: d["model"].update(init_seed=0))
    run1 = state(lambda d: d["model"].update(init_seed=1))
    assert not same(run0, run1)
    fixed1 = state(lambda d: d["model"]["tiny"]["pretrain"].update(init_seed=0))
    fixed0 = state(lambda d: d["model"].update(init_seed=0))
    # The fixed seed's base is the one a run of that seed pretrains without the key.
    assert same(fixed1, fixed0) and same(fixed0, run0)
    assert not same(state(lambda d: d["model"]["tiny"]["pretrain"].update(init_seed=1)), run0)


def test_cache_file_checks_reject_other_keys_and_altered_weights(tmp_path):
    from canary_trainer.backends.tiny_model import TinyConfig, TinyGPT
    from canary_trainer.base_model import FORMAT, load_cached, save_cached

    def model(seed):
        torch.manual_seed(seed)
        return TinyGPT(TinyConfig(vocab_size=100, n_layer=1, n_head=2, d_model=16, max_len=32))

    path = tmp_path / "k.pt"
    save_cached(path, "a" * 64, {"x": 1}, model(1), {"updates": 3, "final_loss": 0.5, "build_wall_s": 1.0})
    target = model(2)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    assert load_cached(path, "b" * 64, target) is None  # another key's file
    blob = torch.load(path)
    assert blob["format"] == FORMAT
    blob["state_dict"]["tok.weight"][0, 0] += 1.0  # a flipped value that still unpickles
    torch.save(blob, path)
    assert load_cached(path, "a" * 64, target) is None
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())  # untouched on failure
    save_cached(path, "a" * 64, {"x": 1}, model(1), {"updates": 3, "final_loss": 0.5, "build_wall_s": 1.0})
    assert load_cached(path, "a" * 64, target)["updates"] == 3
    assert all(torch.equal(model(1).state_dict()[k], v) for k, v in target.state_dict().items())
