"""Runs sharded over two ranks (training.gpus: 2, FSDP2) on CPU with gloo, under the launcher the
worker uses (python -m torch.distributed.run), on the random-initialised Qwen3 and Llama 3 test
models: the loss curve and the scores of the single-process run of the same rows, the rows of each
update split over the ranks in order, a kill -9 of one rank resumed to the uninterrupted sharded
run's result, and a rank count that disagrees with the manifest refused."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
import torch.distributed as td  # noqa: E402

from canary_trainer import exit_codes  # noqa: E402
from canary_trainer.memory import micro_size  # noqa: E402

from .conftest import PYTHON, run_cli, run_here, trainer_env  # noqa: E402
from .fixtures import make_run  # noqa: E402
from .hf_fixtures import hub_env  # noqa: E402,F401  (fixture)
from .test_hf_backend import spec  # noqa: E402

pytestmark = pytest.mark.skipif(not td.is_available() or not td.is_gloo_available(), reason="torch.distributed with gloo is not available")

# Stated tolerances: the two ranks sum the same per-row gradients in another order (and FSDP
# averages then rescales them), so losses and scores agree to float32 rounding, not bit for bit.
LOSS_TOL = 1e-4
SCORE_TOL = 1e-4


def _manifests(tmp_path: Path, family: str, updates: int = 6) -> tuple[Path, Path]:
    """The same rows twice: one manifest sharded over 2 ranks, one for a single process."""
    kw = dict(updates=updates, batch_size=4, length=2, n_focal=1, n_held=1, kinds=("hidden",), checkpoint_every=2,
              utility_rows=2, decode=("prefill",), max_new_tokens=4, lr=1e-2, model=spec(family))
    sharded = make_run(tmp_path / "sharded", training={"gpus": 2, "parallel": "fsdp"}, **kw)
    single = make_run(tmp_path / "single", **kw)
    a, b = (json.loads(p.read_text()) for p in (sharded, single))
    assert a["rows"] == b["rows"]  # the same rows file, byte for byte
    return sharded, single


def _torchrun(manifest: Path, out: Path, *args: str) -> subprocess.Popen:
    env = trainer_env(CANARY_TRAINER_PARENT_WATCH="0", OMP_NUM_THREADS="1")
    return subprocess.Popen([PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "canary_trainer", "run", "--manifest", str(manifest), "--out", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _sharded(manifest: Path, out: Path, *args: str) -> list[dict]:
    proc = _torchrun(manifest, out, *args)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())


def _scores(out: Path, result: dict) -> dict[str, np.ndarray]:
    return {p["probe_id"]: np.fromfile(out / p["scores_file"], dtype="<f4")
            for e in result["evaluations"] for p in e["probes"]}


def test_micro_batches_split_the_update_in_order():
    # 4 rows, 2 ranks: micro-batches of 2 rows, rank 0 takes rows 0-1, rank 1 rows 2-3.
    assert micro_size(4, 2) == 2 and micro_size(5, 2) == 3 and micro_size(1, 2) == 1
    rows = list(range(8, 12))
    chunks = [rows[s: s + 2] for s in range(0, 4, 2)]
    assert [chunks[r::2] for r in range(2)] == [[[8, 9]], [[10, 11]]]
    assert sum((c for r in range(2) for c in chunks[r::2]), []) == rows


@pytest.fixture(scope="module")
def straight(hub_env, tmp_path_factory):
    """`straight(family)`: the family's two manifests, and the output folder and events of its
    uninterrupted sharded run, run once per module (the kill -9 test resumes to the Qwen3 one)."""
    done: dict[str, tuple[Path, Path, Path, list[dict]]] = {}

    def get(family: str) -> tuple[Path, Path, Path, list[dict]]:
        if family not in done:
            root = tmp_path_factory.mktemp(f"straight-{family}")
            sharded, single = _manifests(root, family)
            done[family] = (sharded, single, root / "out2", _sharded(sharded, root / "out2"))
        return done[family]

    return get


# Llama 3 repeats the Qwen3 check on a second architecture: a multi-minute study of the full tier.
@pytest.mark.parametrize("family", ["qwen3", pytest.param("llama3", marks=pytest.mark.full)])
def test_two_ranks_equal_one_process(straight, tmp_path, family):
    sharded, single, out2, events = straight(family)
    # Progress from rank 0 only: one started, one step per update, one done.
    assert [e["event"] for e in events].count("started") == 1
    assert [e["update"] for e in events if e["event"] == "step"] == list(range(1, 7))
    assert [e["event"] for e in events].count("done") == 1
    run_here(single, tmp_path / "out1")
    r2, r1 = _result(out2), _result(tmp_path / "out1")
    assert r2["training"]["rows"] == r1["training"]["rows"] == 24
    assert r2["training"]["tokens"] == r1["training"]["tokens"]  # the same target tokens, so the same rows
    c2, c1 = (np.array([p[1] for p in r["training"]["loss_curve"]]) for r in (r2, r1))
    assert len(c2) == len(c1) == 6
    assert np.max(np.abs(c2 - c1)) < LOSS_TOL, (c2, c1)
    assert abs(r2["utility"]["final_loss"] - r1["utility"]["final_loss"]) < LOSS_TOL
    s2, s1 = _scores(out2, r2), _scores(tmp_path / "out1", r1)
    assert s2.keys() == s1.keys() and s2
    for k in s1:
        assert np.max(np.abs(s2[k] - s1[k])) < SCORE_TOL, k
    # Scores written once: one file per probe and phase, listed once in result.json.
    files = sorted(p.relative_to(out2).as_posix() for p in (out2 / "scores").rglob("*.f32"))
    assert files == sorted(p["scores_file"] for e in r2["evaluations"] for p in e["probes"])
    # The checkpoints are sharded: a torch.distributed.checkpoint folder and each rank's RNG.
    newest = sorted((out2 / "checkpoints").iterdir())[-1]
    assert (newest / "dcp" / ".metadata").is_file() and (newest / "rng-1.pt").is_file()
    assert json.loads((newest / "meta.json").read_text())["ranks"] == 2


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


@pytest.mark.full
def test_kill_9_of_one_rank_resumes_to_the_uninterrupted_sharded_run(straight, tmp_path):
    sharded, _, uninterrupted, _ = straight("qwen3")
    broken = tmp_path / "broken"
    proc = _torchrun(sharded, broken)
    rank0 = None
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "started":
            rank0 = event["pid"]
        if event["event"] == "checkpoint" and event["update"] == 2:
            others = [p for p in _children(proc.pid) if p != rank0]
            assert len(others) == 1, others
            os.kill(others[0], signal.SIGKILL)
            break
    proc.communicate(timeout=300)
    assert proc.returncode != 0
    events = _sharded(sharded, broken, "--resume")
    assert next(e for e in events if e["event"] == "started")["resumed_from"] == 2
    a, b = _result(uninterrupted), _result(broken)
    assert a["training"]["loss_curve"] == b["training"]["loss_curve"]
    assert b["training"]["resumed_from"] == 2
    for pa, pb in zip(a["evaluations"][-1]["probes"], b["evaluations"][-1]["probes"], strict=True):
        assert (uninterrupted / pa["scores_file"]).read_bytes() == (broken / pb["scores_file"]).read_bytes()
        assert pa["greedy"] == pb["greedy"]


def test_a_rank_count_other_than_the_manifest_is_refused(hub_env, tmp_path):
    sharded, _ = _manifests(tmp_path, "qwen3", updates=2)
    res = run_cli(sharded, tmp_path / "out")
    assert res.rc == exit_codes.BAD_INPUT
    assert "training.gpus is 2, but this trainer was started as 1 rank(s)" in res.of("error")[0]["message"]
    time.sleep(0)
