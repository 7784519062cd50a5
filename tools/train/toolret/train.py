"""Contrastive fine-tuning: query -> tool InfoNCE over in-batch and hard
negatives, AdamW, checkpoints chosen on held-out whole tools."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import data, model


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on besides the data and the base weights."""

    seed: int = 17
    epochs: int = 1
    batch_size: int = 32
    negatives: int = 1  # hard negatives drawn per query per epoch
    lr: float = 3e-5
    warmup: float = 0.1  # share of the steps
    weight_decay: float = 0.01
    scale: float = 20.0  # 1 / temperature at the start
    learn_scale: bool = False
    symmetric: bool = False  # add the tool -> query direction
    max_query: int = 64
    max_tool: int = 64
    bucket: int = 16
    max_steps: int = 0  # 0: every batch of every epoch
    evals_per_epoch: int = 2  # 0: only after the last step
    eval_base: bool = True  # also measure the base model before the first step
    source_weights: str = ""  # "apibench=0.5,..." keep that share of a source's training pairs
    # Tool texts in training ("raw": as toolret-train stores them, "<name>:
    # <description> Parameters: a, b."; "index": as the daemon embeds a
    # catalog tool, labels.ToolText) and in the held-out evaluation, which
    # also cuts texts where the daemon does (the manifest's max_tokens).
    tool_text: str = "raw"
    eval_text: str = "index"
    eval_max_tokens: int = 256


def _weighted(pairs: list[data.Pair], spec: str, rng: np.random.Generator) -> list[data.Pair]:
    if not spec:
        return pairs
    w = {k: float(v) for k, v in (kv.split("=") for kv in spec.split(","))}
    return [p for p in pairs if rng.random() < w.get(p.family, 1.0)]


class Encoder:
    """The model's shape and jitted embedding function."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.kw = dict(num_layers=int(cfg["num_hidden_layers"]), num_heads=int(cfg["num_attention_heads"]),
                       eps=float(cfg.get("layer_norm_eps", 1e-12)))
        self.embed = jax.jit(partial(model.embed, **self.kw))

    def encode(self, params: model.Params, ids: list[list[int]], max_len: int, batch: int = 64) -> np.ndarray:
        """Vectors of many texts, batched by length (fewer pad tokens)."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), params["embeddings.word_embeddings.weight"].shape[1]), np.float32)
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            x, m = data.pad([ids[i] for i in idx], max_len, 16, rows=batch)
            out[idx] = np.asarray(self.embed(params, x, m))[: len(idx)]
        return out


def retrieval(q: np.ndarray, t: np.ndarray, gold: list[set[int]]) -> dict[str, float]:
    """top-1 and recall@k (any gold tool in the top k) of each query row
    against the tool rows, by cosine."""
    s = q @ t.T
    top = np.argsort(-s, axis=1)[:, :10]
    res = {"top1": 0.0, "recall@5": 0.0, "recall@10": 0.0, "mrr@10": 0.0}
    for i, g in enumerate(gold):
        row = list(top[i])
        res["top1"] += row[0] in g
        res["recall@5"] += any(j in g for j in row[:5])
        res["recall@10"] += any(j in g for j in row)
        for r, j in enumerate(row):
            if j in g:
                res["mrr@10"] += 1 / (r + 1)
                break
    return {k: round(v / max(len(gold), 1), 4) for k, v in res.items()}


@dataclass
class HeldOut:
    """The held-out queries, each against every held-out tool and every
    negative of the held-out pairs (the catalog a query is ranked in)."""

    queries: list[str]
    tools: list[str]
    gold: list[set[int]]
    family: list[str]

    @classmethod
    def of(cls, held: list[data.Pair]) -> "HeldOut":
        tools = list(dict.fromkeys([p.pos for p in held] + [n for p in held for n in p.neg]))
        col = {t: i for i, t in enumerate(tools)}
        qs: dict[str, tuple[set[int], str]] = {}
        for p in held:
            qs.setdefault(p.query, (set(), p.family))[0].add(col[p.pos])
        return cls(list(qs), tools, [g for g, _ in qs.values()], [f for _, f in qs.values()])

    def measure(self, enc: Encoder, params: model.Params, tokens: data.Tokens, s: Settings) -> dict[str, Any]:
        q = enc.encode(params, tokens.ids(self.queries), s.eval_max_tokens)
        t = enc.encode(params, tokens.ids(self.tools), s.eval_max_tokens)
        res: dict[str, Any] = {"queries": len(self.queries), "tools": len(self.tools), **retrieval(q, t, self.gold)}
        fams = sorted(set(self.family))
        if len(fams) > 1:
            res["per_source"] = {}
            for f in fams:
                rows = [i for i, x in enumerate(self.family) if x == f]
                res["per_source"][f] = {"queries": len(rows), **retrieval(q[rows], t, [self.gold[i] for i in rows])}
        return res


def score(m: dict[str, Any]) -> float:
    """What checkpoints are chosen by: the mean of top-1 and recall@5 on
    the held-out tools."""
    return (m["top1"] + m["recall@5"]) / 2


def _decay_mask(params: model.Params) -> model.Params:
    return {k: v.ndim == 2 and "LayerNorm" not in k for k, v in params.items()}  # type: ignore[misc]


def make_step(enc: Encoder, s: Settings, opt: optax.GradientTransformation) -> Callable[..., Any]:
    kw = enc.kw

    def loss_fn(trainable: dict[str, Any], b: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        p = trainable["params"]
        q = model.embed(p, b["q_ids"], b["q_mask"], **kw)
        t = model.embed(p, b["t_ids"], b["t_mask"], **kw)
        scale = jnp.exp(trainable["log_scale"]) if s.learn_scale else jnp.float32(s.scale)
        logits = jnp.where(b["allowed"], scale * (q @ t.T), -1e9)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, b["labels"]).mean()
        if s.symmetric:
            # Each query's positive against the batch's queries: a query
            # whose gold set holds that tool is no negative for it.
            pos = t[b["labels"]]
            ok = jnp.take_along_axis(b["allowed"], b["labels"][None, :].repeat(q.shape[0], 0), axis=1).T
            ok = ok | jnp.eye(q.shape[0], dtype=bool)
            ok = ok & ~((b["labels"][:, None] == b["labels"][None, :]) & ~jnp.eye(q.shape[0], dtype=bool))
            l2 = jnp.where(ok, scale * (pos @ q.T), -1e9)
            loss = (loss + optax.softmax_cross_entropy_with_integer_labels(l2, jnp.arange(q.shape[0])).mean()) / 2
        acc = (jnp.argmax(logits, axis=1) == b["labels"]).mean()
        return loss, acc

    @jax.jit
    def step(state: dict[str, Any], opt_state: Any, b: dict[str, jax.Array]) -> tuple[Any, Any, jax.Array, jax.Array]:
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(state, b)
        if not s.learn_scale:
            grads = {**grads, "log_scale": jnp.zeros_like(grads["log_scale"])}
        updates, opt_state = opt.update(grads, opt_state, state)
        return optax.apply_updates(state, updates), opt_state, loss, acc

    return step


def train(weights: dict[str, np.ndarray], cfg: dict[str, Any], split: data.Split, tokens: data.Tokens, s: Settings,
          log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Fine-tune; returns the chosen checkpoint's full state dict (the
    base's other tensors carried over) and the run's record."""
    rng = np.random.default_rng(s.seed)
    enc = Encoder(cfg)
    layers = enc.kw["num_layers"]
    params = model.trainable(weights, layers)  # type: ignore[arg-type]
    state = {"params": params, "log_scale": jnp.float32(math.log(s.scale))}
    train_pairs = data.retext(_weighted(split.train, s.source_weights, rng), s.tool_text)
    per_epoch = len(train_pairs) // s.batch_size
    total = per_epoch * s.epochs
    if s.max_steps:
        total = min(total, s.max_steps)
    if total < 1:
        raise ValueError(f"{len(train_pairs)} training pairs make no batch of {s.batch_size}")
    sched = optax.warmup_cosine_decay_schedule(0.0, s.lr, max(1, int(s.warmup * total)), total, s.lr * 0.05)
    decay = {"params": _decay_mask(params), "log_scale": False}
    opt = optax.adamw(sched, weight_decay=s.weight_decay, mask=decay)
    opt_state = opt.init(state)
    step = make_step(enc, s, opt)
    held = HeldOut.of(data.retext(split.held, s.eval_text)) if split.held else None

    evals: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, np.ndarray]] | None = None

    def evaluate(n: int) -> None:
        nonlocal best
        if held is None:
            return
        t0 = time.time()
        m = held.measure(enc, state["params"], tokens, s)
        m.update(step=n, scale=round(float(jnp.exp(state["log_scale"])), 3), seconds=round(time.time() - t0, 1))
        evals.append(m)
        log(f"   held-out @ step {n}: top1 {m['top1']:.4f} recall@5 {m['recall@5']:.4f} ({m['seconds']} s)")
        if n > 0 and (best is None or score(m) > best[0]):
            best = (score(m), n, {k: np.asarray(v) for k, v in state["params"].items()})

    if s.eval_base:
        evaluate(0)
    # Held-out evaluations evals_per_epoch times an epoch, the last one
    # after the last step (never twice in a row).
    points = {per_epoch * i // s.evals_per_epoch for i in range(1, s.epochs * s.evals_per_epoch + 1)} \
        if s.evals_per_epoch else set()
    n, t_start, losses, loads = 0, time.time(), [], [os.getloadavg()[0]]
    for epoch in range(s.epochs):
        for b in data.batches(train_pairs, tokens, batch_size=s.batch_size, negatives=s.negatives, rng=rng,
                              max_query=s.max_query, max_tool=s.max_tool, bucket=s.bucket):
            if n >= total:
                break
            feed = {"q_ids": b.q_ids, "q_mask": b.q_mask, "t_ids": b.t_ids, "t_mask": b.t_mask,
                    "labels": b.labels, "allowed": b.allowed}
            state, opt_state, loss, acc = step(state, opt_state, feed)
            n += 1
            losses.append(float(loss))
            if n % 20 == 0 or n == total:
                loads.append(os.getloadavg()[0])
                el = time.time() - t_start
                log(f"   step {n}/{total} epoch {epoch + 1} loss {np.mean(losses[-20:]):.4f} acc {float(acc):.3f} "
                    f"{el / n:.2f} s/step, {el / 60:.1f} min")
            if n in points and n < total:
                evaluate(n)
    evaluate(n)
    seconds = time.time() - t_start
    if best is None:  # no held-out side (the final run trains on everything)
        chosen, chosen_step = {k: np.asarray(v) for k, v in state["params"].items()}, n
    else:
        chosen, chosen_step = best[2], best[1]
    out = {k: np.asarray(v) for k, v in weights.items()}
    out.update(chosen)
    record = {"settings": asdict(s), "split": split.how, "train_pairs": len(train_pairs),
              "held_out_pairs": len(split.held), "held_out_tools": len(split.held_tools), "steps": n,
              "steps_per_epoch": per_epoch, "chosen_step": chosen_step, "train_seconds": round(seconds, 1),
              "final_scale": round(float(jnp.exp(state["log_scale"])), 3), "evals": evals,
              "nice": os.nice(0), "seconds_per_step": round((seconds - sum(e["seconds"] for e in evals if e["step"] > 0)) / max(n, 1), 2),
              "loadavg_1min_mean": round(float(np.mean(loads)), 2), "loadavg_1min_max": round(float(np.max(loads)), 2),
              "loss_first_20": round(float(np.mean(losses[:20])), 4), "loss_last_20": round(float(np.mean(losses[-20:])), 4)}
    return out, record


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")
