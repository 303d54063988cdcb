"""Stand-in trainer: speaks the trainer's CLI, progress protocol and exit codes without tensors.

    PYTHONPATH=test/runner python3 -m stand_in_trainer run --manifest M --out DIR [--resume] [--force]

Queue tests, the queue benchmark and `worker` tests use it where the real trainer would cost
minutes. It keeps the contract the real trainer keeps:
- stdout carries progress events only (schemas/progress.schema.json); logs go to stderr;
- it holds flock(<out>/.lock) while it runs, so two trainers never write one folder;
- SIGTERM: checkpoint, emit an `interrupted` error event, exit 75; parent gone: the same;
- a stdout whose reader is gone (EPIPE) is ignored, so the checkpoint still happens;
- --resume continues from <out>/checkpoints/state.json;
- a result.json of this manifest, found once it holds the folder lock, is the run done: it emits
  `done` and exits 0 without training (--force trains anyway);
- exit codes as TRAINER_EXIT (0 ok, 1 retryable, 2 bad input, 3 diverged, 6 folder busy, 75 interrupted);
  it waits CANARY_TRAINER_LOCK_WAIT_S (default 30) for the folder lock.

The "model" is a running SHA-256 chain over the updates, so the final "scores" depend on every
update having been applied exactly once in order, whether or not the run was interrupted.

Behaviour knobs live in the manifest's free-form task.params.stand_in (tests write them):
  step_s       seconds per update (default 0.01; env STAND_IN_STEP_S overrides)
  fail_exit    exit with this code once `fail_at` updates are done ...
  fail_at      ... (default 0) ...
  fail_times   ... on the first N attempts (default: every attempt); counted in <out>/.failures
  noop         emit started + done and write result.json at once (the queue benchmark)
  junk_stdout  print a line that is not an event (a protocol violation the worker must survive)
  ignore_sigterm  keep training through SIGTERM (so the worker's SIGKILL after the grace is tested)
  ranks_wait   under torch.distributed.run, the other ranks stay up like the real trainer's (which
               meet rank 0 in every update's collectives) until rank 0 wrote result.json, SIGTERM
               (exit 75) or their parent is gone (exit 75)

Each attempt appends "pid first last how" to <out>/.trained when it ends (updates first..last
trained), so drills can tell whether any update was trained twice, and "start end
CUDA_VISIBLE_DEVICES WORLD_SIZE how" to <out>/.slots. Under torch.distributed.run only rank 0 works;
the other ranks append "rank world pid" to <out>/.ranks and exit 0 (with ranks_wait: once rank 0 is done).
"""

import argparse
import fcntl
import hashlib
import json
import os
import signal
import struct
import sys
import time

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_BUSY, EXIT_INTERRUPTED = 0, 1, 2, 6, 75


def emit(event, **fields):
    record = {"v": 1, "event": event, "t": time.time()}
    record.update(fields)
    # Like the real trainer: a reader that is gone (a worker killed -9) must not stop the checkpoint.
    try:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass


def write_atomic(path, data):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def step_hash(acc, update):
    return hashlib.sha256(f"{acc}:{update}".encode()).hexdigest()


def finished(out, run_id, manifest_sha):
    try:
        with open(os.path.join(out, "result.json"), "rb") as handle:
            done = json.loads(handle.read())
    except (OSError, ValueError):
        return False
    return isinstance(done, dict) and done.get("run_id") == run_id and done.get("manifest_sha256") == manifest_sha


class Stop:
    requested = False


def main(argv):
    parser = argparse.ArgumentParser(prog="stand_in_trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--manifest", required=True)
    run.add_argument("--out", required=True)
    run.add_argument("--resume", action="store_true")
    run.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)

    try:
        with open(args.manifest, "rb") as handle:
            manifest_bytes = handle.read()
        manifest = json.loads(manifest_bytes)
        run_id = manifest["run_id"]
        total = int(manifest["training"]["updates"])
        every = int(manifest["training"].get("checkpoint_every", 50))
        batch = int(manifest["training"].get("batch_size", 1))
    except (OSError, ValueError, KeyError, TypeError) as error:
        emit("error", kind="bad_manifest", message=f"{args.manifest}: {error}", recoverable=False)
        return EXIT_BAD_INPUT
    knobs = ((manifest.get("task") or {}).get("params") or {}).get("stand_in") or {}
    # Under torch.distributed.run (a run over several slots): rank 0 does the work; the other
    # ranks note that they were started and end at once.
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if rank != 0:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, ".ranks"), "a") as handle:
            handle.write(f"{rank} {world} {os.getpid()}\n")
        if not knobs.get("ranks_wait"):
            return EXIT_OK
        signal.signal(signal.SIGTERM, lambda *_: setattr(Stop, "requested", True))
        parent = os.getppid()
        while not os.path.exists(os.path.join(args.out, "result.json")):
            if Stop.requested or os.getppid() != parent:
                return EXIT_INTERRUPTED
            time.sleep(0.05)
        return EXIT_OK
    step_s = float(os.environ.get("STAND_IN_STEP_S", knobs.get("step_s", 0.01)))

    out = args.out
    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    lock = open(os.path.join(out, ".lock"), "w")
    deadline = time.time() + float(os.environ.get("CANARY_TRAINER_LOCK_WAIT_S", 30))
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.time() > deadline:
                emit("error", kind="internal", message=f"{out} is locked by another trainer", recoverable=True)
                return EXIT_BUSY
            time.sleep(0.05)

    # Like the real trainer (canary_trainer.run._finished), under the folder lock: a result.json of
    # this manifest means the run is done. A trainer that waited for the lock while the one it
    # waited for finished the run must not train it again.
    manifest_sha = hashlib.sha256(manifest_bytes).hexdigest()
    if not args.force and finished(out, run_id, manifest_sha):
        print(f"stand-in: {out}/result.json already holds this manifest's result", file=sys.stderr)
        emit("done", result="result.json", wall_s=0.0)
        return EXIT_OK

    if knobs.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        # Like the real trainer: SIGTERM and SIGINT (a terminal's Ctrl-C reaches the whole group) stop it.
        signal.signal(signal.SIGTERM, lambda *_: setattr(Stop, "requested", True))
        signal.signal(signal.SIGINT, lambda *_: setattr(Stop, "requested", True))
    if knobs.get("junk_stdout"):
        print("Loading weights: 100%", flush=True)
    parent = os.getppid()
    started = time.time()
    state_path = os.path.join(out, "checkpoints", "state.json")
    state = {"update": 0, "acc": run_id, "attempts": []}
    if args.resume and os.path.exists(state_path):
        with open(state_path) as handle:
            state = json.load(handle)
    resumed_from = state["update"] if state["update"] > 0 else None
    first_update = state["update"]

    def trained(how):
        with open(os.path.join(out, ".trained"), "a") as handle:
            handle.write(f"{os.getpid()} {first_update} {state['update']} {how}\n")
        # Which devices this attempt had, and when: gang tests check that no two runs overlapped.
        with open(os.path.join(out, ".slots"), "a") as handle:
            devices = os.environ.get("CUDA_VISIBLE_DEVICES", "")
            handle.write(f"{started:.3f} {time.time():.3f} {devices or '-'} {world} {how}\n")
    state["attempts"].append({"pid": os.getpid(), "resumed_from": state["update"]})
    emit("started", run_id=run_id, pid=os.getpid(), device="cpu", backend="tiny",
         total_updates=total, resumed_from=resumed_from)

    def checkpoint():
        write_atomic(state_path, json.dumps(state).encode())
        emit("checkpoint", update=state["update"], path="checkpoints/state.json")

    failures_path = os.path.join(out, ".failures")
    fail_exit = knobs.get("fail_exit")
    if fail_exit is not None:
        failures = int(open(failures_path).read()) if os.path.exists(failures_path) else 0
        if knobs.get("fail_times") is not None and failures >= int(knobs["fail_times"]):
            fail_exit = None

    if knobs.get("noop"):
        state["update"] = total
    while state["update"] < total:
        if fail_exit is not None and state["update"] >= int(knobs.get("fail_at", 0)):
            write_atomic(failures_path, str(failures + 1).encode())
            kind = {EXIT_BAD_INPUT: "bad_manifest", 3: "diverged"}.get(int(fail_exit), "internal")
            print(f"stand-in: failing on purpose with exit {fail_exit}", file=sys.stderr)
            emit("error", kind=kind, message=f"planned failure (exit {fail_exit})",
                 recoverable=int(fail_exit) == EXIT_FAILURE)
            return int(fail_exit)
        if Stop.requested or os.getppid() != parent:
            checkpoint()
            emit("error", kind="interrupted", message="stopped; resumable", recoverable=True)
            trained("interrupted")
            return EXIT_INTERRUPTED
        time.sleep(step_s)
        state["update"] += 1
        state["acc"] = step_hash(state["acc"], state["update"])
        emit("step", update=state["update"], total=total, loss=1.0 / state["update"], lr=1e-3,
             rows_per_s=batch / max(step_s, 1e-6))
        if state["update"] % every == 0 and state["update"] < total:
            checkpoint()

    emit("eval", phase="final", done=0, total=1)
    scores_dir = os.path.join(out, "scores", "final")
    os.makedirs(scores_dir, exist_ok=True)
    digest = hashlib.sha256(state["acc"].encode()).digest()
    scores = [-(b + 1) / 16.0 for b in digest]
    write_atomic(os.path.join(scores_dir, "f000.hidden.f32"), struct.pack(f"<{len(scores)}f", *scores))
    emit("eval", phase="final", done=1, total=1)
    result = {
        "run_id": run_id,
        "manifest_sha256": manifest_sha,
        "stand_in": {"acc": state["acc"], "updates": state["update"], "attempts": state["attempts"]},
    }
    write_atomic(os.path.join(out, "result.json"), (json.dumps(result, indent=2) + "\n").encode())
    trained("done")
    emit("done", result="result.json", wall_s=time.time() - started)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
