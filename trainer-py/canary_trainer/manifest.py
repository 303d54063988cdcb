"""Read and validate one run manifest, once, at the edge. Everything downstream trusts the result:
schema-valid, defaults applied, cross-field rules checked, paths resolved inside the run folder."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from . import schemas
from .bounded import MAX_JSON_BYTES, BoundError, read_bounded
from .errors import BadManifest
from .images import check_images, check_parts
from .manifest_types import Canary, CandidateSpace, Eval, HeldOut, ManifestData, ModelSpec, Pretrain, SampledText
from .train_config import TrainingConfig


@dataclass
class Manifest:
    path: Path
    sha256: str
    data: ManifestData
    # probe canary id -> "inserted" | "held_out"
    arms: dict[str, str] = field(default_factory=dict)
    # (width, height) of each listed image, by path, when the model reads images
    image_sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    # sampled-text: each canary's secret once sampled_text.fill replaced the placeholders (else None)
    secrets: dict[str, str] | None = None

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def model(self) -> ModelSpec:
        return self.data["model"]

    @property
    def pretrain(self) -> Pretrain | None:
        """model.tiny.pretrain (defaults applied), or None: fine-tune the random initialisation."""
        return self.model.get("tiny", {}).get("pretrain") if self.model["backend"] == "tiny" else None

    @functools.cached_property
    def training(self) -> TrainingConfig:
        return TrainingConfig.from_manifest(self.data["training"])

    @property
    def eval(self) -> Eval:
        return self.data["eval"]

    @property
    def sampled_text(self) -> SampledText | None:
        """The sampled-text design's spec: codes, substitutes and candidates are placeholders."""
        return self.data.get("sampled_text")

    @property
    def space(self) -> CandidateSpace:
        return self.data["candidate_space"]

    @property
    def utility_metrics(self) -> list[str]:
        """utility.metrics (absent: ["loss"]); [] when the manifest has no utility rows."""
        u = self.data.get("utility")
        return list(u.get("metrics", ["loss"])) if u is not None else []

    @property
    def utility_generation(self) -> int | None:
        """utility.max_new_tokens when the utility rows are decoded (a metric besides loss), else None."""
        if any(m != "loss" for m in self.utility_metrics):
            return self.data["utility"]["max_new_tokens"]
        return None

    def resolve(self, ref_path: str, field_name: str) -> Path:
        target = (self.folder / ref_path).resolve()
        root = self.folder.resolve()
        if root != target and root not in target.parents:
            raise BadManifest(f"{self.path}: field {field_name}: path {ref_path!r} leaves the manifest's folder; "
                              "fix: give a path relative to the folder holding manifest.json")
        return target

    def canary(self, canary_id: str) -> Canary | HeldOut:
        for c in self.data["canaries"]:
            if c["id"] == canary_id:
                return c
        for h in self.data["held_out"]:
            if h["id"] == canary_id:
                return h
        raise KeyError(canary_id)

    def candidates(self, canary_id: str) -> list[str]:
        """Candidate codes in score order: every code for an exhaustive space (index = the code read
        in base |alphabet|, digit values = positions in `alphabet`), else the canary's own list."""
        space = self.space
        if space["kind"] == "exhaustive":
            return exhaustive_codes(space["alphabet"], space["length"])
        return list(self.canary(canary_id)["candidates"])


def exhaustive_codes(alphabet: str, length: int) -> list[str]:
    return ["".join(p) for p in itertools.product(alphabet, repeat=length)]


def _fail(path: Path, field_name: str, problem: str, fix: str) -> BadManifest:
    return BadManifest(f"{path}: field {field_name}: {problem}; fix: {fix}")


def _check_code(path: Path, field_name: str, code: str, space: dict) -> None:
    alphabet, length = space["alphabet"], space["length"]
    if len(code) != length or any(ch not in alphabet for ch in code):
        raise _fail(path, field_name, f"code {code!r} is not {length} characters of {alphabet!r}",
                    "make every code match candidate_space.alphabet and candidate_space.length")


def _check_rules(path: Path, m: dict) -> dict[str, str]:
    tr = m["training"]
    if m["rows"]["count"] != tr["batch_size"] * tr["updates"]:
        raise _fail(path, "rows.count", f"{m['rows']['count']} rows but batch_size*updates = "
                    f"{tr['batch_size']}*{tr['updates']} = {tr['batch_size'] * tr['updates']}",
                    "write exactly batch_size*updates rows, in training order")
    for i, n in enumerate(m["eval"]["checkpoints"]):
        if n > tr["updates"]:
            raise _fail(path, f"eval.checkpoints[{i}]", f"update {n} is after the last update {tr['updates']}",
                        "evaluate only at updates 1..training.updates")
    model = m["model"]
    if model["backend"] == "tiny":
        tiny = model.setdefault("tiny", {})
        full = schemas.load_schema("manifest")  # the root resolves pretrain.rows' #/$defs/file_ref
        schemas.apply_defaults(full["properties"]["model"]["properties"]["tiny"], tiny, full)
        if tiny["d_model"] % tiny["n_head"]:
            raise _fail(path, "model.tiny.n_head", f"d_model {tiny['d_model']} is not divisible by n_head {tiny['n_head']}",
                        "choose n_head dividing d_model")
        if (tiny["d_model"] // tiny["n_head"]) % 2:
            raise _fail(path, "model.tiny.n_head", f"head dimension d_model/n_head = {tiny['d_model'] // tiny['n_head']} "
                        "is odd, and rotary positions rotate pairs of dimensions",
                        "choose d_model and n_head with an even d_model/n_head (e.g. d_model 64, n_head 2)")
        pre = tiny.get("pretrain")
        if pre is not None and pre["rows"]["count"] != pre["batch_size"] * pre["updates"]:
            raise _fail(path, "model.tiny.pretrain.rows.count", f"{pre['rows']['count']} rows but batch_size*updates = "
                        f"{pre['batch_size']}*{pre['updates']} = {pre['batch_size'] * pre['updates']}",
                        "write exactly batch_size*updates pretraining rows, in training order")
        if tr["max_length"] > tiny["max_len"]:
            raise _fail(path, "training.max_length", f"{tr['max_length']} exceeds model.tiny.max_len {tiny['max_len']}",
                        "raise model.tiny.max_len or lower training.max_length")
        if model["finetune"]["method"] != "full":
            raise _fail(path, "model.finetune.method", "lora is available on the hf backend only",
                        "use method: full with the tiny backend")
    else:
        hf = model.setdefault("hf", {})
        schemas.apply_defaults(schemas.load_schema("manifest")["properties"]["model"]["properties"]["hf"], hf)
        if model["finetune"]["method"] == "lora" and "r" not in model["finetune"]:
            raise _fail(path, "model.finetune.r", "lora needs a rank r", "set model.finetune.r (e.g. 16)")

    space = m["candidate_space"]
    if len(set(space["alphabet"])) != len(space["alphabet"]):
        raise _fail(path, "candidate_space.alphabet", f"{space['alphabet']!r} repeats a character",
                    "list each character once")
    if space["kind"] == "exhaustive" and space["size"] != len(space["alphabet"]) ** space["length"]:
        raise _fail(path, "candidate_space.size", f"{space['size']} != |alphabet|^length = "
                    f"{len(space['alphabet'])}^{space['length']}", "set size to alphabet^length")

    arms: dict[str, str] = {}
    for i, c in enumerate(m["canaries"]):
        arms[c["id"]] = "inserted"
        _check_code(path, f"canaries[{i}].code", c["code"], space)
        if sorted(c["positions"]) != c["positions"] or len(c["positions"]) != c["dose"]:
            raise _fail(path, f"canaries[{i}].positions", f"{c['positions']} is not ascending with dose {c['dose']} entries",
                        "list dose row indices in ascending order")
        if c["positions"] and c["positions"][-1] >= m["rows"]["count"]:
            raise _fail(path, f"canaries[{i}].positions", f"row {c['positions'][-1]} is past the last row",
                        "place canaries inside rows.jsonl")
    for i, c in enumerate(m["held_out"]):
        if c["id"] in arms:
            raise _fail(path, f"held_out[{i}].id", f"{c['id']!r} is also an inserted canary", "use distinct ids")
        arms[c["id"]] = "held_out"
        _check_code(path, f"held_out[{i}].code", c["code"], space)
    seen: set[str] = set()
    for i, p in enumerate(m["probes"]):
        if p["id"] in seen:
            raise _fail(path, f"probes[{i}].id", f"{p['id']!r} is used twice", "give every probe a unique id")
        seen.add(p["id"])
        if p["canary_id"] not in arms:
            raise _fail(path, f"probes[{i}].canary_id", f"{p['canary_id']!r} names no canary or held-out canary",
                        "point probes at ids listed in canaries or held_out")
        if p["kind"] != "hidden" and p["shown_code"] is None:
            raise _fail(path, f"probes[{i}].shown_code", f"a {p['kind']} probe needs the code it shows", "set shown_code")
    if space["kind"] == "sampled":
        groups = [("canaries", m["canaries"]), ("held_out", m["held_out"])]
        for group, items in groups:
            for i, c in enumerate(items):
                cands = c.get("candidates")
                where = f"{group}[{i}].candidates"
                if cands is None:
                    raise _fail(path, where, "missing for a sampled candidate space", "list the candidate codes")
                if len(cands) != space["size"] or len(set(cands)) != len(cands) or c["code"] not in cands:
                    raise _fail(path, where, f"needs {space['size']} distinct codes including the true code",
                                "list the true code plus candidate_space.decoys decoys")
                for j, code in enumerate(cands):
                    _check_code(path, f"{where}[{j}]", code, space)
    if "sampled_text" in m:
        _check_sampled_text(path, m, arms)
    return arms


def _check_sampled_text(path: Path, m: dict, arms: dict[str, str]) -> None:
    st, space = m["sampled_text"], m["candidate_space"]
    if space["kind"] != "sampled" or space.get("decoys") != st["decoys"]:
        raise _fail(path, "sampled_text.decoys", f"{st['decoys']} decoys but candidate_space is {space['kind']} with "
                    f"{space.get('decoys')} decoys", "plan the run again with canary-audit plan")
    missing = sorted(set(arms) - set(st["seeds"]))
    if missing:
        raise _fail(path, "sampled_text.seeds", f"no seed for canary {missing[0]!r}",
                    "list a seed for every canary and held-out canary")
    if m["training"].get("gpus", 1) > 1:
        raise _fail(path, "training.gpus", "design sampled-text samples its secrets in one process",
                    "run sampled-text cells on one GPU (training.gpus: 1)")


def load_manifest(path: str | Path) -> Manifest:
    path = Path(path)
    try:
        raw = read_bounded(path, MAX_JSON_BYTES)
    except BoundError as exc:
        raise BadManifest(f"{path}: cannot read the manifest ({exc}); fix: pass the path of a run's manifest.json, "
                          "a regular file the controller wrote") from exc
    except OSError as exc:
        raise BadManifest(f"{path}: cannot read the manifest ({exc.strerror}); fix: pass the path of a run's manifest.json") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f":{exc.lineno}:{exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise BadManifest(f"{path}{where}: not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc}); "
                          "fix: write the manifest as UTF-8 JSON") from exc
    problem = schemas.first_error("manifest", data)
    if problem is not None:
        raise BadManifest(f"{path}: {problem}; fix: make the manifest satisfy schemas/manifest.schema.json")
    schemas.apply_defaults(schemas.load_schema("manifest"), data)
    arms = _check_rules(path, data)
    # Schema-valid with its defaults applied: the shape manifest_types describes.
    m = Manifest(path=path, sha256=hashlib.sha256(raw).hexdigest(), data=cast(ManifestData, data), arms=arms)
    m.resolve(data["rows"]["path"], "rows.path")
    if "utility" in data:
        m.resolve(data["utility"]["path"], "utility.path")
    if m.pretrain is not None:
        m.resolve(m.pretrain["rows"]["path"], "model.tiny.pretrain.rows.path")
    m.image_sizes = check_images(path, data)
    for i, probe in enumerate(data["probes"]):
        check_parts(probe["prompt"], f"{path}: probes[{i}]", m.image_sizes)
    return m
