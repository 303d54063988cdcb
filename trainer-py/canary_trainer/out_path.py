"""The output folder a run writes into, checked before anything is written or deleted there.

A worker lays runs out as <run>/manifest.json + <run>/output/. If `output`, or a symlink inside it
(two levels: checkpoints/, scores/<phase>/), leads out of the run folder, checkpoints, scores and
result.json would be written elsewhere, and a fresh run would delete `scores/` and `checkpoints/`
there. Such a folder is refused (bad input, exit 2). An output folder the user names outside the run
folder (`--out DIR` by hand) is taken as given; symlinks inside it must still stay inside it.

run.py calls this first: `out = check_output_folder(opts.out, opts.manifest)`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import BadManifest


def check_output_folder(out: Path, manifest: Path) -> Path:
    """Returns `out` made absolute; raises BadManifest when it leads out of its root."""
    out_abs = Path(os.path.abspath(out))
    run_dir = Path(os.path.abspath(manifest)).parent
    root = run_dir if _within(run_dir, out_abs) else out_abs
    real_root = root.resolve()
    if not _within(real_root, out_abs.resolve()):
        raise BadManifest(f"{out_abs}: the output folder leads outside the run folder {real_root} through a symlink "
                          f"(to {out_abs.resolve()}); fix: remove the link, the trainer creates the folder")
    for link in _symlinks_under(out_abs, 2):
        if not _within(real_root, link.resolve()):
            raise BadManifest(f"{link}: a symlink in the output folder leads outside {real_root} "
                              f"(to {link.resolve()}); fix: remove it")
    return out_abs


def _within(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _symlinks_under(folder: Path, depth: int) -> list[Path]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.is_symlink():
            found.append(entry)
        elif depth > 1 and entry.is_dir():
            found.extend(_symlinks_under(entry, depth - 1))
    return found
