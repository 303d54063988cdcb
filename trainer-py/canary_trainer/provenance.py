"""Provenance stamps (schemas/stamp.schema.json, component "trainer"): which code produced an
artifact. Taken at start and again at write; `changed_mid_run` when they name different code."""

from __future__ import annotations

import datetime as _dt
import hashlib
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
TRAINER_DIR = PACKAGE_DIR.parent  # trainer-py/


def code_sha256() -> str:
    """sha256 over canary_trainer/**/*.py: relative path, NUL, contents, NUL, in sorted order (the
    same scheme as the controller's hashTree)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(path.relative_to(TRAINER_DIR).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=TRAINER_DIR, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions(extra: dict[str, str] | None = None) -> dict[str, str]:
    import numpy
    import torch

    from . import __version__

    out = {"canary_trainer": __version__, "python": platform.python_version(), "torch": torch.__version__,
           "numpy": numpy.__version__}
    # Read from package metadata: importing transformers just to learn its version costs seconds.
    for dist in ("transformers", "peft", "tokenizers"):
        v = _version(dist)
        if v:
            out[dist] = v
    if extra:
        out.update(extra)
    return out


def stamp(extra_versions: dict[str, str] | None = None) -> dict:
    commit = _git("rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        # trainer-py/ and the schemas it validates against define the trainer's behaviour.
        status = _git("status", "--porcelain", "--", ".", "../schemas")
        dirty = None if status is None else len(status) > 0
    return {
        "component": "trainer",
        "git_commit": commit,
        "git_dirty": dirty,
        "code_sha256": code_sha256(),
        "versions": versions(extra_versions),
        "host": socket.gethostname(),
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def numerics(device: str, dtype: str) -> dict:
    """The floating-point path a run took (result.json `numerics`): two runs of the same manifest
    agree bit for bit only when these agree. CPU model and torch's CPU capability (the vector
    instruction set its kernels dispatch to; ATEN_CPU_CAPABILITY overrides it), threads, GPU
    model and count, driver/CUDA/cuDNN versions, compute dtype, deterministic-algorithm flags."""
    import torch

    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        capability = None
    cuda = torch.cuda.is_available()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    driver = None
    if cuda:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = None
    cudnn = torch.backends.cudnn.version() if cuda and torch.backends.cudnn.is_available() else None
    return {
        "cpu_model": _cpu_model(),
        "cpu_capability": capability,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "device": device,
        "gpu_model": gpus[0] if gpus else None,
        "gpu_count": len(gpus),
        "driver_version": driver,
        "cuda_version": torch.version.cuda if cuda else None,
        "cudnn_version": str(cudnn) if cudnn is not None else None,
        "dtype": dtype,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }


def differ(a: dict, b: dict) -> bool:
    """True when two stamps describe different code (time and host are ignored)."""
    return any(a[k] != b[k] for k in ("git_commit", "git_dirty", "code_sha256", "versions"))


def finish(at_start: dict, extra_versions: dict[str, str] | None = None) -> dict:
    at_write = stamp(extra_versions)
    return {"at_start": at_start, "at_write": at_write, "changed_mid_run": differ(at_start, at_write)}
