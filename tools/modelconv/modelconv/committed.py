"""Models trained here and committed under models/ (kind "committed" in
sources.toml): nothing is fetched or trained; the committed files are
checked against their manifest and copied where MODEL_DIR expects them."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .build import BuildError, pool, run_onnx, sha256_file

FILES = ("model.onnx", "tokenizer.json", "manifest.json", "verify.json")

# The committed verify.json holds the vectors ONNX Runtime gave when the
# model was written; the copy must give the same (only the thread count
# may differ).
MIN_COSINE = 0.9999


def check(src: Path) -> dict[str, Any]:
    """The manifest of a committed model directory whose model.onnx and
    tokenizer.json match the sha256s it records."""
    if not src.is_dir():
        raise BuildError(f"{src}: not committed yet (make train-model, then make train-promote, then commit it)")
    for f in FILES:
        if not (src / f).is_file():
            raise BuildError(f"{src}: no {f}")
    man = json.loads((src / "manifest.json").read_text())
    got = sha256_file(src / "model.onnx")
    if got != man.get("model_sha256"):
        raise BuildError(f"{src}/model.onnx: sha256 {got} is not the manifest's {man.get('model_sha256')} "
                         "(a Git LFS pointer or a changed file?)")
    want_tok = man.get("tokenizer_sha256")
    if want_tok and sha256_file(src / "tokenizer.json") != want_tok:
        raise BuildError(f"{src}/tokenizer.json: sha256 is not the manifest's {want_tok}")
    return man


def verify(d: Path, man: dict[str, Any]) -> float:
    """Min cosine between what ONNX Runtime gives now on the check
    sentences and the vectors verify.json recorded."""
    rep = json.loads((d / "verify.json").read_text())
    got = run_onnx(d / "model.onnx", man["output"], rep["ids"], "token_type_ids" in man["inputs"])
    cos = []
    for h, want in zip(got, rep["vectors"]):
        v = pool(h, np.ones(h.shape[:2], np.int64), man["pooling"], True)[0]
        w = np.asarray(want, np.float64)
        cos.append(float(v @ w / np.linalg.norm(w)))
    return min(cos)


def install(name: str, spec: dict[str, Any], out: Path) -> Path:
    src = Path(spec["dir"])
    man = check(src)
    if man.get("name") != name:
        raise BuildError(f"{src}/manifest.json names {man.get('name')!r}, not {name!r}")
    if out.is_dir() and all((out / f).is_file() for f in FILES):
        try:
            if sha256_file(out / "model.onnx") == man["model_sha256"] and all(
                (out / f).read_bytes() == (src / f).read_bytes() for f in FILES[1:]
            ):
                print(f">> {name}: up to date in {out}", file=sys.stderr)
                return out
        except OSError:
            pass
    tmp = out.parent / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in FILES:
        shutil.copyfile(src / f, tmp / f)
    c = verify(tmp, man)
    print(f">> {name}: sha256 matches the manifest; cosine to the committed verify.json vectors: min {c:.6f}",
          file=sys.stderr)
    if c < MIN_COSINE:
        raise BuildError(f"{name}: ONNX Runtime disagrees with the committed vectors: min cosine {c:.6f} < {MIN_COSINE}")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    print(f">> {name}: wrote {out}", file=sys.stderr)
    return out
