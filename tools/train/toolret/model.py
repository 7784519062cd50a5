"""The BERT encoder in JAX: the forward pass of modelconv/bert.py's NumPy
reference, written over the same state-dict names so the trained weights
go back through the converter unchanged.

Post-norm layers, exact-erf GELU, absolute positions, token types all zero
(the engine feeds zeros), mean pooling over the attention mask and L2
normalisation: what the daemon computes from the converted graph.
"""

from __future__ import annotations

import math
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, jax.Array]

# Parameters the encoder reads; the rest of a checkpoint (the pooler,
# position_ids buffers) is carried through to the output unchanged.
_EMB = (
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
)
_LAYER = (
    "attention.self.query.weight", "attention.self.query.bias",
    "attention.self.key.weight", "attention.self.key.bias",
    "attention.self.value.weight", "attention.self.value.bias",
    "attention.output.dense.weight", "attention.output.dense.bias",
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "intermediate.dense.weight", "intermediate.dense.bias",
    "output.dense.weight", "output.dense.bias",
    "output.LayerNorm.weight", "output.LayerNorm.bias",
)


def param_names(num_layers: int) -> list[str]:
    """The state-dict names the encoder trains, in a fixed order."""
    names = list(_EMB)
    for n in range(num_layers):
        names += [f"encoder.layer.{n}.{s}" for s in _LAYER]
    return names


def trainable(weights: Mapping[str, np.ndarray], num_layers: int) -> Params:
    """The encoder's float32 parameters as JAX arrays."""
    return {k: jnp.asarray(np.asarray(weights[k], dtype=np.float32)) for k in param_names(num_layers)}


def _ln(x: jax.Array, g: jax.Array, b: jax.Array, eps: float) -> jax.Array:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def hidden(p: Params, ids: jax.Array, mask: jax.Array, *, num_layers: int, num_heads: int, eps: float) -> jax.Array:
    """Last hidden state [batch, seq, hidden] (float32)."""
    b, s = ids.shape
    x = (
        p["embeddings.word_embeddings.weight"][ids]
        + p["embeddings.position_embeddings.weight"][:s][None]
        + p["embeddings.token_type_embeddings.weight"][0][None, None]
    )
    x = _ln(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"], eps)
    h = x.shape[-1]
    hd = h // num_heads
    bias = (1.0 - mask.astype(jnp.float32))[:, None, None, :] * jnp.finfo(jnp.float32).min
    for n in range(num_layers):
        pre = f"encoder.layer.{n}."

        def lin(t: jax.Array, name: str) -> jax.Array:
            return t @ p[pre + name + ".weight"].T + p[pre + name + ".bias"]

        def heads(t: jax.Array) -> jax.Array:
            return t.reshape(b, s, num_heads, hd).transpose(0, 2, 1, 3)

        q = heads(lin(x, "attention.self.query"))
        k = heads(lin(x, "attention.self.key"))
        v = heads(lin(x, "attention.self.value"))
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd) + bias
        probs = jax.nn.softmax(scores, axis=-1)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
        x = _ln(lin(ctx, "attention.output.dense") + x,
                p[pre + "attention.output.LayerNorm.weight"], p[pre + "attention.output.LayerNorm.bias"], eps)
        inter = jax.nn.gelu(lin(x, "intermediate.dense"), approximate=False)
        x = _ln(lin(inter, "output.dense") + x,
                p[pre + "output.LayerNorm.weight"], p[pre + "output.LayerNorm.bias"], eps)
    return x


def embed(p: Params, ids: jax.Array, mask: jax.Array, **cfg: object) -> jax.Array:
    """Mean-pooled, L2-normalised sentence vectors [batch, hidden]."""
    x = hidden(p, ids, mask, **cfg)  # type: ignore[arg-type]
    m = mask.astype(jnp.float32)[..., None]
    v = (x * m).sum(1) / jnp.maximum(m.sum(1), 1e-9)
    # rsqrt of a clamped sum of squares, not v / norm(v): an empty padding
    # row (v = 0) would give the norm's gradient 0/0 = NaN.
    return v * jax.lax.rsqrt(jnp.maximum((v * v).sum(-1, keepdims=True), 1e-24))
