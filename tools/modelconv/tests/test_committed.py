"""Weights from a local folder (what tools/train writes) and the committed
kind: a model directory checked against its manifest and verify.json
before it is installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.numpy import save_file

from modelconv.build import BuildError, Paths, build, load_sources
from test_bert import CFG, random_weights, word_level_tokenizer


def local_model(tmp_path: Path) -> Path:
    """A tiny int8 model built from a folder of weights, as toolret run does."""
    src = tmp_path / "trained"
    src.mkdir()
    w = {k: v.astype("float32") for k, v in random_weights(CFG, seed=5).items()}
    save_file(w, str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": CFG.hidden_size,
                                                 "num_hidden_layers": CFG.num_hidden_layers,
                                                 "num_attention_heads": CFG.num_attention_heads,
                                                 "intermediate_size": CFG.intermediate_size}))
    (src / "tokenizer.json").write_text(json.dumps(word_level_tokenizer()))
    man = {"dims": CFG.hidden_size, "max_tokens": 16}
    sources = {"t-fp32": {"kind": "bert-safetensors", "dir": str(src), "weights": "model.safetensors",
                          "config": "config.json", "tokenizer": "tokenizer.json", "license": "test", "manifest": man},
               "t": {"kind": "quantized", "from": "t-fp32", "license": "test", "min_cosine": 0.9, "manifest": man}}
    out = build("t", sources, Paths(cache=tmp_path / "c", wheelhouse=None), tmp_path / "built")
    fp32 = json.loads((tmp_path / "built" / "t-fp32" / "manifest.json").read_text())
    assert fp32["source"]["dir"] == str(src) and len(fp32["source"]["weights_sha256"]) == 64
    assert json.loads((tmp_path / "built" / "t-fp32" / "verify.json").read_text())["min_cosine"] >= 0.999
    return out


def committed_sources(tmp_path: Path, model: Path) -> dict:
    repo = tmp_path / "repo" / "models"
    shutil.copytree(model, repo / "t", ignore=shutil.ignore_patterns("build.json"))
    (repo / "sources.toml").write_text('[models."t"]\nkind = "committed"\ndir = "t"\nlicense = "test"\n')
    return load_sources(repo / "sources.toml")


def test_committed_model_is_checked_then_installed(tmp_path: Path) -> None:
    sources = committed_sources(tmp_path, local_model(tmp_path))
    assert Path(sources["t"]["dir"]).is_absolute(), "dir is not resolved against sources.toml"
    dest = tmp_path / "cache"
    out = build("t", sources, Paths(cache=dest, wheelhouse=None), dest)
    assert out == dest / "t"
    for f in ("model.onnx", "tokenizer.json", "manifest.json", "verify.json"):
        assert (out / f).read_bytes() == (Path(sources["t"]["dir"]) / f).read_bytes(), f
    mtime = (out / "model.onnx").stat().st_mtime_ns
    build("t", sources, Paths(cache=dest, wheelhouse=None), dest)
    assert (out / "model.onnx").stat().st_mtime_ns == mtime, "an up-to-date copy was rewritten"


@pytest.mark.parametrize("damage,match", [
    ("model", "sha256"),
    ("tokenizer", "tokenizer.json: sha256"),
    ("vectors", "disagrees with the committed vectors"),
    ("name", "names"),
])
def test_committed_model_refused_when_it_does_not_match(tmp_path: Path, damage: str, match: str) -> None:
    sources = committed_sources(tmp_path, local_model(tmp_path))
    d = Path(sources["t"]["dir"])
    man = json.loads((d / "manifest.json").read_text())
    man["tokenizer_sha256"] = __import__("hashlib").sha256((d / "tokenizer.json").read_bytes()).hexdigest()
    if damage == "model":
        (d / "model.onnx").write_bytes((d / "model.onnx").read_bytes() + b"\0")
    elif damage == "tokenizer":
        (d / "tokenizer.json").write_text((d / "tokenizer.json").read_text() + " ")
    elif damage == "vectors":
        ver = json.loads((d / "verify.json").read_text())
        ver["vectors"] = [[-x for x in v] for v in ver["vectors"]]
        (d / "verify.json").write_text(json.dumps(ver))
    elif damage == "name":
        man["name"] = "other"
    (d / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(BuildError, match=match):
        build("t", sources, Paths(cache=tmp_path / "cache", wheelhouse=None), tmp_path / "cache")
    assert not (tmp_path / "cache" / "t").exists(), "a refused model was installed"
