"""Failures end with an error event naming the cause and a non-zero exit, never a partial result."""

import os

from canary_trainer import exit_codes
from canary_trainer.errors import is_oom

from .conftest import run_cli, trainer_env
from .fixtures import make_run


def test_nan_loss_is_diverged(tmp_path):
    # An absurd learning rate without clipping blows the weights up to inf/NaN within a few updates.
    manifest = make_run(tmp_path / "run", updates=10, batch_size=2, length=2, lr=1e30,
                        schedule={"kind": "constant"}, training={"grad_clip": 0, "loss_explode": 1e300})
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == exit_codes.DIVERGED
    err = res.of("error")[-1]
    assert err["kind"] == "diverged" and err["recoverable"] is False and "not finite" in err["message"]
    assert not (tmp_path / "out" / "result.json").exists()


def test_exploding_loss_is_diverged(tmp_path):
    manifest = make_run(tmp_path / "run", updates=4, batch_size=2, length=2, training={"loss_explode": 0.5})
    res = run_cli(manifest, tmp_path / "out")
    assert res.rc == exit_codes.DIVERGED
    assert "update 1: loss" in res.of("error")[-1]["message"]
    assert "above training.loss_explode 0.5" in res.of("error")[-1]["message"]


def test_hf_backend_without_transformers_is_a_missing_dependency(tmp_path):
    # The trainer venv has transformers: a package that fails to import stands in for its absence.
    stub = tmp_path / "no-transformers" / "transformers"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('raise ImportError("No module named \'transformers\'")\n')
    model = {"backend": "hf", "name": "Qwen/Qwen3-1.7B", "hf": {"dtype": "float32"}}
    manifest = make_run(tmp_path / "run", updates=2, batch_size=2, length=2, model=model)
    env = trainer_env()
    env["PYTHONPATH"] = f"{stub.parent}{os.pathsep}{env['PYTHONPATH']}"
    res = run_cli(manifest, tmp_path / "out", env=env)
    assert res.rc == exit_codes.MISSING_MODEL
    err = res.of("error")[-1]
    assert err["kind"] == "missing_dependency" and "transformers" in err["message"]


def test_oom_is_recognised():
    class OutOfMemoryError(RuntimeError):
        pass

    assert is_oom(OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:75] . DefaultCPUAllocator: can't allocate memory: "
                               "you tried to allocate 80000000000 bytes. Error code 12 (Cannot allocate memory)"))
    assert is_oom(MemoryError())
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("out of memory"))


def test_exit_codes_match_the_controller_contract():
    import re
    from pathlib import Path

    ts = (Path(__file__).resolve().parents[2] / "src" / "contracts" / "progress.ts").read_text()
    table = dict(re.findall(r"^\s+([A-Z_]+): (\d+),", ts[ts.index("TRAINER_EXIT"):], re.M))
    ours = {k: getattr(exit_codes, k) for k in ("OK", "FAILURE", "BAD_INPUT", "DIVERGED", "MISSING_MODEL", "OOM",
                                                 "BUSY", "INTERRUPTED")}
    assert {k: int(v) for k, v in table.items()} == ours
