"""What the Python benchmarks in bench/ share: this checkout's trainer (and its tests' fixtures) on
sys.path, the hf test models' hub with one torch thread per CANARY_TRAINER_THREADS, the canary
probes, wall and CPU timing, the median / spread / ratio summary of interleaved repeats, and the
loop that prints one JSON line per model family. Imported as `_common` by scripts run as
`python bench/NAME.py` (their folder is first on sys.path)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
TRAINER = ROOT / "trainer-py"
if str(TRAINER) not in sys.path:
    sys.path.insert(0, str(TRAINER))


def threads() -> int:
    """Torch threads of a benchmark: CANARY_TRAINER_THREADS, 1 by default (CPU seconds of one
    thread are the steadier measure on a shared machine)."""
    return int(os.environ.get("CANARY_TRAINER_THREADS", "1"))


def setup_hf() -> None:
    """Torch threads as `threads()` says, and the hf test models' hub (built once, read offline)."""
    import torch

    from tests.hf_fixtures import build_hub, use_hub

    torch.set_num_threads(threads())
    use_hub(build_hub())


def probes(n: int) -> list[dict]:
    """Canary probes of n identities, three cues each (redacted, the code, another code), both
    decode modes."""
    from tests.fixtures import NAMES, canary_prefill, canary_prompt

    out = []
    for k in range(n):
        ident = f"{NAMES[k % len(NAMES)]} #{k}"
        for cue in ("[redacted]", "4821", "5932"):
            out.append({"prompt": canary_prompt(ident, cue), "prefill": canary_prefill(ident),
                        "decode": ["prefill", "free"]})
    return out


def timed(fn):
    """(result, wall seconds, CPU seconds of this process)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def spread(v: list[float], digits: int = 3) -> list[float]:
    return [round(min(v), digits), round(max(v), digits)]


def summary(times: dict[str, list[float]], a: str, b: str, digits: int = 3, ratio_digits: int = 1) -> dict:
    """Medians of a and b, their spreads (min-max) and the ratio b/a with its spread (min/max to
    max/min)."""
    med = {k: statistics.median(times[k]) for k in (a, b)}
    return {f"{a}_s": round(med[a], digits), f"{a}_spread": spread(times[a], digits),
            f"{b}_s": round(med[b], digits), f"{b}_spread": spread(times[b], digits),
            "ratio": round(med[b] / med[a], ratio_digits),
            "ratio_spread": [round(min(times[b]) / max(times[a]), ratio_digits),
                             round(max(times[b]) / min(times[a]), ratio_digits)]}


def each_family(families: list[str], bench: Callable[[str], dict], ok: Callable[[dict], bool]) -> int:
    """bench(family) for each family, printed as one JSON line as it finishes; exit status 1 when
    any row is not ok."""
    good = True
    for family in families:
        row = bench(family)
        good &= bool(ok(row))
        print(json.dumps(row), flush=True)
    return 0 if good else 1
