import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAINER_DIR = Path(__file__).resolve().parent.parent
if str(TRAINER_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINER_DIR))

# The trainer CLI runs under the interpreter running the tests (the trainer venv by default).
PYTHON = os.environ.get("CANARY_AUDIT_PYTHON") or sys.executable


def trainer_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TRAINER_DIR)
    env.setdefault("CANARY_TRAINER_THREADS", "1")
    env.update(extra)
    return env


class CliRun:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]


def run_cli(manifest: Path, out: Path, *args: str, env: dict | None = None, timeout: float = 300) -> CliRun:
    proc = subprocess.run([PYTHON, "-m", "canary_trainer", "run", "--manifest", str(manifest), "--out", str(out), *args],
                          capture_output=True, text=True, env=env or trainer_env(), timeout=timeout)
    return CliRun(proc)


class HereRun:
    """A run in this test process (run.run): the CLI's answer without a new interpreter, for the
    runs of a test that only need to be a run (an uninterrupted reference, a resume); the one that
    is killed or signalled stays a CLI process. Failures raise (TrainerError) instead of an exit code."""

    def __init__(self, manifest: Path, out: Path, resume: bool, env: dict[str, str]):
        from canary_trainer.events import Events
        from canary_trainer.run import RunOptions, run

        self.events: list[dict] = []
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        import torch

        # One thread, as trainer_env gives the CLI (a session fixture runs before the _threads one).
        torch.set_num_threads(int(env.get("CANARY_TRAINER_THREADS", "1")))
        err = io.StringIO()  # the trainer's log lines (events.log writes to sys.stderr)
        try:
            with contextlib.redirect_stderr(err):
                self.result = run(RunOptions(manifest=manifest, out=out, resume=resume,
                                             events=Events(stream=io.StringIO(), observer=self.events.append)))
        finally:
            self.stderr = err.getvalue()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]


def run_here(manifest: Path, out: Path, resume: bool = False, **env: str) -> HereRun:
    """`env`: variables set for the run only (e.g. CANARY_TRAINER_CACHE)."""
    return HereRun(manifest, out, resume, env)


def start_cli(manifest: Path, out: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "canary_trainer", "run", "--manifest", str(manifest), "--out", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or trainer_env())


# Files that share a session fixture run on one pytest-xdist worker (`npm run test:py` runs two);
# every other file is a group of its own, so a module's fixtures are built once, on one worker.
SHARED_GROUPS = {"test_resume": "resume", "test_checkpoint_integrity": "resume"}


# The longest files first (CPU seconds of one session each, README's suite table), so that the two
# workers do not end on one long file while the other sits idle; `npm run test:py` passes
# --no-loadscope-reorder so that pytest-xdist hands out groups in this order rather than by test count.
LONGEST_FIRST = ("test_fsdp", "test_hf_training", "test_utility", "test_resume", "test_checkpoint_integrity",
                 "test_trie", "test_base_model", "test_hf_vision", "test_hf_backend")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            module = item.module.__name__.rpartition(".")[2]
            item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS.get(module, module)))

    def rank(item) -> int:
        module = item.module.__name__.rpartition(".")[2]
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order


@pytest.fixture(scope="session")
def resume_reference(tmp_path_factory) -> tuple[Path, Path]:
    """The interruption tests' manifest (test_resume._manifest) and its uninterrupted run, run once
    per session: test_resume and test_checkpoint_integrity compare their resumed runs to it."""
    from .test_resume import _manifest

    root = tmp_path_factory.mktemp("resume-reference")
    manifest = _manifest(root)
    run_here(manifest, root / "straight")
    return manifest, root / "straight"


@pytest.fixture(autouse=True)
def _threads():
    import torch

    torch.set_num_threads(1)
    yield
