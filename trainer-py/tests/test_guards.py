"""Guards for a queue whose worker can be SIGKILLed while its trainer child runs on: one trainer per
output folder (flock), and a trainer whose parent died stops like on SIGTERM."""

import json
import os
import subprocess
import time

from canary_trainer import exit_codes
from canary_trainer.checkpoint import list_updates
from canary_trainer.lock import FolderLock

from .conftest import PYTHON, TRAINER_DIR, run_cli, trainer_env
from .fixtures import make_run


def test_second_trainer_on_the_same_folder_waits_then_exits_busy(tmp_path):
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2, length=2, n_focal=1, n_held=0, kinds=("hidden",))
    out = tmp_path / "out"
    holder = FolderLock(out, wait_s=0)
    holder.acquire()
    try:
        t0 = time.monotonic()
        res = run_cli(manifest, out, env=trainer_env(CANARY_TRAINER_LOCK_WAIT_S="1.5"))
        waited = time.monotonic() - t0
    finally:
        holder.release()
    assert res.rc == exit_codes.BUSY  # nothing done: the worker tries again without spending an attempt
    err = res.of("error")[-1]
    assert err["recoverable"] is True and ".lock" in err["message"] and f"pid {os.getpid()}" in err["message"]
    assert waited >= 1.5
    assert not res.of("started") and not (out / "result.json").exists()
    # once the holder is gone, the same command runs
    assert run_cli(manifest, out).rc == 0


def test_lock_is_released_for_a_waiting_trainer(tmp_path):
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2, length=2, n_focal=1, n_held=0, kinds=("hidden",))
    out = tmp_path / "out"
    holder = FolderLock(out, wait_s=0)
    holder.acquire()
    proc = subprocess.Popen([PYTHON, "-m", "canary_trainer", "run", "--manifest", str(manifest), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=trainer_env())
    first = proc.stderr.readline()  # the trainer says it waits before it can start
    holder.release()
    stdout, stderr = proc.communicate(timeout=120)
    assert "waiting for the lock" in first and "held by pid" in first
    assert proc.returncode == 0, stderr
    assert '"event":"done"' in stdout


LAUNCHER = r"""
import subprocess, sys
out = open(sys.argv[3], "w")
child = subprocess.Popen([sys.executable, "-m", "canary_trainer", "run", "--manifest", sys.argv[1], "--out", sys.argv[2]],
                         stdout=out, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
child.wait()
"""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waiting to be reaped by its new parent counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_trainer_stops_and_checkpoints_when_its_parent_dies(tmp_path):
    manifest = make_run(tmp_path / "run", updates=400, batch_size=2, length=2, checkpoint_every=1000, n_focal=1,
                        n_held=0, kinds=("hidden",))
    out, events_file = tmp_path / "out", tmp_path / "events.jsonl"
    launcher = subprocess.Popen([PYTHON, "-c", LAUNCHER, str(manifest), str(out), str(events_file)],
                                stdout=subprocess.PIPE, text=True, env=trainer_env(), cwd=TRAINER_DIR)
    trainer_pid = int(launcher.stdout.readline())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until training is under way
        if events_file.exists() and '"event":"step"' in events_file.read_text():
            break
        time.sleep(0.05)
    launcher.kill()  # SIGKILL: the launcher cannot tell its child anything
    launcher.wait()
    deadline = time.monotonic() + 60
    while _alive(trainer_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(trainer_pid), "the orphaned trainer kept running"
    events = [json.loads(x) for x in events_file.read_text().splitlines()]
    assert events[-1]["event"] == "error" and events[-1]["kind"] == "interrupted"
    assert "parent process" in events[-1]["message"]
    assert events[-2]["event"] == "checkpoint"
    assert list_updates(out) and list_updates(out)[-1] < 400
    assert not (out / "result.json").exists()


def test_stray_prints_do_not_reach_the_event_stream(tmp_path):
    """A library that prints to stdout must not corrupt the protocol: such output goes to stderr."""
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2, length=2, n_focal=1, n_held=0, kinds=("hidden",))
    code = ("import sys, runpy; import canary_trainer.train as t; orig = t.train_update\n"
            "def noisy(*a, **k):\n    print('stray library output'); return orig(*a, **k)\n"
            "t.train_update = noisy\n"
            "import canary_trainer.run as r; r.train_update = noisy\n"
            "sys.argv = ['canary_trainer', 'run', '--manifest', sys.argv[1], '--out', sys.argv[2]]\n"
            "runpy.run_module('canary_trainer', run_name='__main__')\n")
    proc = subprocess.run([PYTHON, "-c", code, str(manifest), str(tmp_path / "out")], capture_output=True, text=True,
                          env=trainer_env())
    assert proc.returncode == 0, proc.stderr
    assert "stray library output" in proc.stderr
    for line in proc.stdout.splitlines():
        assert json.loads(line)["v"] == 1
