"""BERT encoders: a NumPy reference forward pass and an ONNX graph builder.

Both read the same weights (a Hugging Face ``BertModel`` state dict, as
safetensors stores it), so the graph can be checked against the reference
on fixed sentences. The reference follows the published architecture
(Devlin et al. 2019; ``transformers.models.bert.modeling_bert``): token,
position and segment embeddings, then post-norm layers of multi-head
self-attention and an exact-erf GELU feed-forward block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Weights = Mapping[str, np.ndarray]

OPSET = 17  # LayerNormalization is a standard op from opset 17


@dataclass(frozen=True)
class BertConfig:
    """The architecture fields of a Hugging Face ``config.json``."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"

    @classmethod
    def from_json(cls, cfg: Mapping[str, object]) -> "BertConfig":
        if cfg.get("model_type") not in (None, "bert"):
            raise ValueError(f"not a BERT config: model_type={cfg.get('model_type')!r}")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        act = str(cfg.get("hidden_act", "gelu"))
        if act != "gelu":
            raise ValueError(f"hidden_act {act!r} is not supported (want gelu)")
        c = cls(
            hidden_size=int(cfg["hidden_size"]),
            num_hidden_layers=int(cfg["num_hidden_layers"]),
            num_attention_heads=int(cfg["num_attention_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
            hidden_act=act,
        )
        if c.hidden_size % c.num_attention_heads:
            raise ValueError("hidden_size is not a multiple of num_attention_heads")
        return c

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def strip_prefix(weights: Weights) -> dict[str, np.ndarray]:
    """Drop a leading ``bert.`` (checkpoints saved from a task head)."""
    out = {}
    for k, v in weights.items():
        out[k[len("bert."):] if k.startswith("bert.") else k] = v
    return out


def check_weights(w: Weights, cfg: BertConfig, word: bool = True) -> None:
    """Fail early, naming the tensor, when weights do not fit the config
    (word=False: the word embedding comes separately)."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    want: dict[str, tuple[int | None, ...]] = {
        "embeddings.word_embeddings.weight": (None, h),
        "embeddings.position_embeddings.weight": (None, h),
        "embeddings.token_type_embeddings.weight": (None, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for n in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            want[p + f"attention.self.{name}.weight"] = (h, h)
            want[p + f"attention.self.{name}.bias"] = (h,)
        want[p + "attention.output.dense.weight"] = (h, h)
        want[p + "attention.output.dense.bias"] = (h,)
        want[p + "attention.output.LayerNorm.weight"] = (h,)
        want[p + "attention.output.LayerNorm.bias"] = (h,)
        want[p + "intermediate.dense.weight"] = (i, h)
        want[p + "intermediate.dense.bias"] = (i,)
        want[p + "output.dense.weight"] = (h, i)
        want[p + "output.dense.bias"] = (h,)
        want[p + "output.LayerNorm.weight"] = (h,)
        want[p + "output.LayerNorm.bias"] = (h,)
    if not word:
        del want["embeddings.word_embeddings.weight"]
    for name, shape in want.items():
        if name not in w:
            raise ValueError(f"weights: missing {name}")
        got = w[name].shape
        if len(got) != len(shape) or any(s is not None and s != g for s, g in zip(shape, got)):
            raise ValueError(f"weights: {name} has shape {got}, want {shape}")


def int8_blocks(table: np.ndarray, block: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """A float table [rows, cols] as build_onnx's word_blocks: int8 values
    [rows, cols] and float32 scales [rows, cols/block], symmetric, one
    scale per block of `block` columns (the block's largest magnitude maps
    to 127), so a value is off by at most half its block's scale."""
    rows, cols = table.shape
    if block < 1 or cols % block:
        raise ValueError(f"int8 blocks of {block} do not divide {cols} columns")
    b = np.asarray(table, dtype=np.float32).reshape(rows, cols // block, block)
    scale = np.abs(b).max(axis=-1) / 127.0
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint(b / safe[..., None]), -127, 127).astype(np.int8)
    return q.reshape(rows, cols), scale.astype(np.float32)


# --- the NumPy reference -------------------------------------------------


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def reference_forward(
    w: Weights, cfg: BertConfig, ids: np.ndarray, mask: np.ndarray, types: np.ndarray
) -> np.ndarray:
    """Last hidden state [batch, seq, hidden] in float64, computed directly
    from the weights with NumPy (no ONNX, no ONNX Runtime)."""
    f = {k: v.astype(np.float64) for k, v in w.items() if v.dtype.kind == "f"}
    b, s = ids.shape
    x = (
        f["embeddings.word_embeddings.weight"][ids]
        + f["embeddings.position_embeddings.weight"][np.arange(s)][None]
        + f["embeddings.token_type_embeddings.weight"][types]
    )
    x = _layer_norm(x, f["embeddings.LayerNorm.weight"], f["embeddings.LayerNorm.bias"], cfg.layer_norm_eps)
    bias = (1.0 - mask.astype(np.float64))[:, None, None, :] * np.finfo(np.float32).min
    nh, hd = cfg.num_attention_heads, cfg.head_dim
    for n in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{n}."

        def lin(t: np.ndarray, name: str) -> np.ndarray:
            return t @ f[p + name + ".weight"].T + f[p + name + ".bias"]

        def heads(t: np.ndarray) -> np.ndarray:
            return t.reshape(b, s, nh, hd).transpose(0, 2, 1, 3)

        q = heads(lin(x, "attention.self.query"))
        k = heads(lin(x, "attention.self.key"))
        v = heads(lin(x, "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        scores -= scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, nh * hd)
        x = _layer_norm(
            lin(ctx, "attention.output.dense") + x,
            f[p + "attention.output.LayerNorm.weight"],
            f[p + "attention.output.LayerNorm.bias"],
            cfg.layer_norm_eps,
        )
        inter = _gelu(lin(x, "intermediate.dense"))
        x = _layer_norm(
            lin(inter, "output.dense") + x,
            f[p + "output.LayerNorm.weight"],
            f[p + "output.LayerNorm.bias"],
            cfg.layer_norm_eps,
        )
    return x


# --- the ONNX graph ------------------------------------------------------


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str, **attrs: object) -> str:
        out = self.name(hint)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out


def build_onnx(w: Weights, cfg: BertConfig, output: str = "last_hidden_state",
               word_blocks: tuple[np.ndarray, np.ndarray] | None = None) -> onnx.ModelProto:
    """An ONNX graph (opset 17, float32) computing what reference_forward
    computes: inputs input_ids, attention_mask, token_type_ids (int64
    [batch, seq]); output [batch, seq, hidden].

    word_blocks, when given, replaces the float word embedding by a
    block-quantised one kept as stored (int8 values [vocab, hidden] and
    float32 scales [vocab, hidden/block]): the graph gathers the rows of
    both and multiplies, which gives exactly the dequantised float rows
    for a quarter of the file size (multilingual-e5-small: 250k rows)."""
    check_weights(w, cfg, word=word_blocks is None)
    g = _Graph()
    f32 = lambda name: np.ascontiguousarray(w[name], dtype=np.float32)  # noqa: E731
    h, nh, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim

    if word_blocks is None:
        word = g.const("word_embeddings", f32("embeddings.word_embeddings.weight"))
    pos = g.const("position_embeddings", f32("embeddings.position_embeddings.weight"))
    typ = g.const("token_type_embeddings", f32("embeddings.token_type_embeddings.weight"))
    zero = g.const("zero_i64", np.array(0, dtype=np.int64))
    one = g.const("one_i64", np.array(1, dtype=np.int64))
    one_f = g.const("one_f32", np.array(1.0, dtype=np.float32))
    neg = g.const("mask_min_f32", np.array(np.finfo(np.float32).min, dtype=np.float32))
    scale = g.const("attn_scale", np.array(1.0 / math.sqrt(hd), dtype=np.float32))
    split_shape = g.const("split_heads_shape", np.array([0, 0, nh, hd], dtype=np.int64))
    merge_shape = g.const("merge_heads_shape", np.array([0, 0, h], dtype=np.int64))
    mask_axes = g.const("mask_axes", np.array([1, 2], dtype=np.int64))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    half = g.const("half", np.array(0.5, dtype=np.float32))

    shape = g.op("Shape", ["input_ids"], "ids_shape")
    seq = g.op("Gather", [shape, one], "seq_len", axis=0)
    positions = g.op("Range", [zero, seq, one], "positions")
    if word_blocks is None:
        x = g.op("Gather", [word, "input_ids"], "word_emb")
    else:
        q, d = word_blocks
        nb = d.shape[1]
        if q.shape[1] != h or h % nb:
            raise ValueError(f"word_blocks: values {q.shape}, scales {d.shape} do not fit hidden size {h}")
        wq = g.const("word_embeddings_q", np.ascontiguousarray(q, dtype=np.int8))
        ws = g.const("word_embeddings_scale", np.ascontiguousarray(d, dtype=np.float32)[..., None])
        rows = g.op("Cast", [g.op("Gather", [wq, "input_ids"], "word_q")], "word_qf", to=TensorProto.FLOAT)
        blocks = g.const("word_blocks_shape", np.array([0, 0, nb, h // nb], dtype=np.int64))
        rows = g.op("Reshape", [rows, blocks], "word_blocks")
        rows = g.op("Mul", [rows, g.op("Gather", [ws, "input_ids"], "word_scale")], "word_deq")
        x = g.op("Reshape", [rows, merge_shape], "word_emb")
    x = g.op("Add", [x, g.op("Gather", [pos, positions], "pos_emb")], "emb_sum")
    x = g.op("Add", [x, g.op("Gather", [typ, "token_type_ids"], "type_emb")], "emb_sum")

    def layer_norm(t: str, prefix: str) -> str:
        gamma = g.const(prefix + ".weight", f32(prefix + ".weight"))
        beta = g.const(prefix + ".bias", f32(prefix + ".bias"))
        return g.op("LayerNormalization", [t, gamma, beta], "ln", axis=-1, epsilon=cfg.layer_norm_eps)

    def linear(t: str, prefix: str) -> str:
        wt = g.const(prefix + ".weight_t", np.ascontiguousarray(f32(prefix + ".weight").T))
        bb = g.const(prefix + ".bias", f32(prefix + ".bias"))
        return g.op("Add", [g.op("MatMul", [t, wt], "mm"), bb], "lin")

    x = layer_norm(x, "embeddings.LayerNorm")
    maskf = g.op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inv = g.op("Sub", [one_f, maskf], "mask_inv")
    bias = g.op("Mul", [g.op("Unsqueeze", [inv, mask_axes], "mask_4d"), neg], "mask_bias")

    for n in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{n}."
        q = g.op("Transpose", [g.op("Reshape", [linear(x, p + "attention.self.query"), split_shape], "q")], "q_t", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [linear(x, p + "attention.self.key"), split_shape], "k")], "k_t", perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [linear(x, p + "attention.self.value"), split_shape], "v")], "v_t", perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k], "qk"), scale], "scaled"), bias], "masked")
        probs = g.op("Softmax", [scores], "probs", axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v], "ctx")], "ctx_t", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape], "ctx_merged")
        x = layer_norm(g.op("Add", [linear(ctx, p + "attention.output.dense"), x], "res"), p + "attention.output.LayerNorm")
        inter = linear(x, p + "intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [inter, sqrt2], "gelu_div")], "gelu_erf")
        inter = g.op("Mul", [g.op("Mul", [inter, g.op("Add", [erf, one_f], "gelu_add")], "gelu_mul"), half], "gelu")
        x = layer_norm(g.op("Add", [linear(inter, p + "output.dense"), x], "res"), p + "output.LayerNorm")

    g.nodes.append(helper.make_node("Identity", [x], [output], name="output"))
    ints = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])  # noqa: E731
    graph = helper.make_graph(
        g.nodes,
        "bert_encoder",
        [ints("input_ids"), ints("attention_mask"), ints("token_type_ids")],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", "sequence", h])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="classifierd-modelconv")
    model.ir_version = 8  # readable by every ONNX Runtime since 1.10
    onnx.checker.check_model(model, full_check=True)
    return model
