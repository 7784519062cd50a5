"""toolret-train pairs: reading, the held-out split by whole tools, and
the batches of the contrastive loss.

Nothing here depends on JAX: the splits and batches are plain NumPy, made
from seeded generators, so a run is reproduced from its seeds alone.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Pair:
    query: str
    pos: str
    neg: tuple[str, ...]
    source: str  # the dataset: the part of "source" before the slash

    @property
    def family(self) -> str:
        return self.source.split("/")[0]


def read_pairs(path: Path) -> list[Pair]:
    """Every line of pairs.jsonl.gz (or an uncompressed .jsonl)."""
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                out.append(Pair(query=r["query"], pos=r["pos"], neg=tuple(r.get("neg", ())), source=r["source"]))
            except (ValueError, KeyError) as e:
                raise ValueError(f"{path}:{n}: {e}") from None
    if not out:
        raise ValueError(f"{path}: no pairs")
    return out


def _unit(text: str, seed: int) -> float:
    """A number in [0, 1) fixed by the text and the seed (not Python's
    randomised hash), so a split never depends on the process."""
    h = hashlib.sha256(f"{seed}\x00{text}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


@dataclass
class Split:
    """Training pairs and held-out pairs; no held-out tool is seen in
    training, as a positive or as a negative, and no held-out query."""

    train: list[Pair]
    held: list[Pair]
    held_tools: set[str] = field(default_factory=set)
    how: str = ""


def split(pairs: list[Pair], *, holdout_frac: float = 0.1, holdout_source: str = "", seed: int = 0) -> Split:
    """Hold out whole tools: a tenth of each source's distinct positive
    tools (holdout_frac), or every tool of one source (holdout_source,
    leave-one-source-out). A held-out tool's pairs go to the held-out
    side, with every other pair of their queries; held-out tools are
    removed from the training pairs' negatives."""
    if holdout_source:
        held_tools = {p.pos for p in pairs if p.family == holdout_source}
        how = f"leave-one-source-out: every tool of {holdout_source}"
        if not held_tools:
            raise ValueError(f"no pairs from source {holdout_source!r}")
    else:
        held_tools = {p.pos for p in pairs if _unit(p.pos, seed) < holdout_frac}
        how = f"{holdout_frac:.0%} of the distinct positive tools (sha256 of text and seed {seed})"
    held_queries = {p.query for p in pairs if p.pos in held_tools}
    if holdout_source:
        held_queries |= {p.query for p in pairs if p.family == holdout_source}
    held = [p for p in pairs if p.query in held_queries]
    train = []
    for p in pairs:
        if p.query in held_queries or p.pos in held_tools:
            continue
        train.append(Pair(p.query, p.pos, tuple(n for n in p.neg if n not in held_tools), p.source))
    return Split(train=train, held=held, held_tools=held_tools, how=how)


def humanize(name: str) -> str:
    """labels.Humanize: snake_case, kebab-case, dotted and camelCase names
    in lower-case words ("getUser_info" -> "get user info"). The shared
    cases in labels/testdata/tooltext.json keep the two in step."""
    out = []
    prev_lower = False
    for r in name:
        if r in "_-./":
            out.append(" ")
            prev_lower = False
        elif "A" <= r <= "Z":
            if prev_lower:
                out.append(" ")
            out.append(r.lower())
            prev_lower = False
        else:
            out.append(r)
            prev_lower = "a" <= r <= "z"
    return " ".join("".join(out).split())


PARAMS = " Parameters: "


def tool_text(name: str, desc: str) -> str:
    """labels.ToolText: the text the daemon embeds for a catalog tool."""
    if not desc.strip():
        return humanize(name)
    return humanize(name) + ": " + desc


def index_text(tool: str) -> str:
    """A toolret-train tool text ("<name>: <description> Parameters: a,
    b.") as the daemon embeds a catalog tool (labels.ToolText: the name in
    words, ": ", the description; no parameter names)."""
    i = tool.rfind(PARAMS)
    if i >= 0:
        tool = tool[:i]
    name, _, desc = tool.partition(": ")
    return tool_text(name, desc)


TEXT_FORMATS = {"raw": lambda t: t, "index": index_text}


def retext(pairs: list[Pair], fmt: str) -> list[Pair]:
    """The pairs with every tool text in format fmt ("raw": as stored,
    "index": as the daemon embeds it)."""
    if fmt not in TEXT_FORMATS:
        raise ValueError(f"tool text format {fmt!r} is not one of {sorted(TEXT_FORMATS)}")
    if fmt == "raw":
        return pairs
    f = TEXT_FORMATS[fmt]
    return [Pair(p.query, f(p.pos), tuple(dict.fromkeys(n for n in map(f, p.neg) if n != f(p.pos))), p.source)
            for p in pairs]


class Tokens:
    """Token ids of every text, as the engine makes them: whitespace
    collapsed, special tokens added, cut to max_len keeping [SEP]."""

    def __init__(self, tokenizer_path: Path) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(tokenizer_path))
        self.tok.no_padding()
        self.tok.no_truncation()
        self.cache: dict[str, list[int]] = {}

    def ids(self, texts: list[str]) -> list[list[int]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for t, e in zip(todo, self.tok.encode_batch([" ".join(t.split()) for t in todo])):
            self.cache[t] = e.ids
        return [self.cache[t] for t in texts]


def pad(seqs: list[list[int]], max_len: int, bucket: int, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ids and mask, each sequence cut to max_len keeping its
    last token, the width rounded up to a multiple of bucket (few distinct
    shapes: few compilations), and rows padded with empty rows to rows."""
    cut = [s if len(s) <= max_len else s[: max_len - 1] + s[-1:] for s in seqs]
    width = max(len(s) for s in cut)
    width = min(max_len, -(-width // bucket) * bucket)
    n = rows or len(cut)
    ids = np.zeros((n, width), np.int32)
    mask = np.zeros((n, width), np.int32)
    for i, s in enumerate(cut):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return ids, mask


@dataclass
class Batch:
    q_ids: np.ndarray
    q_mask: np.ndarray
    t_ids: np.ndarray
    t_mask: np.ndarray
    labels: np.ndarray  # [B]: the column of each query's positive
    allowed: np.ndarray  # [B, C] bool: a real candidate that is not another gold tool of the query


def batches(train: list[Pair], tokens: Tokens, *, batch_size: int, negatives: int, rng: np.random.Generator,
            max_query: int, max_tool: int, bucket: int) -> list[Batch]:
    """One epoch: the pairs shuffled, cut into batches of batch_size
    queries (the last, short one dropped), each with its positive and up
    to `negatives` of its hard negatives, drawn at random. Candidate tools
    are the batch's distinct positives and negatives; a query's other gold
    tools are masked out of its row (not counted as negatives)."""
    gold: dict[str, set[str]] = {}
    for p in train:
        gold.setdefault(p.query, set()).add(p.pos)
    order = rng.permutation(len(train))
    out = []
    cols = batch_size * (1 + negatives)
    for start in range(0, len(order) - batch_size + 1, batch_size):
        ps = [train[i] for i in order[start : start + batch_size]]
        cand: dict[str, int] = {}
        for p in ps:
            cand.setdefault(p.pos, len(cand))
        for p in ps:
            if negatives and p.neg:
                pick = rng.choice(len(p.neg), size=min(negatives, len(p.neg)), replace=False)
                for j in sorted(pick):
                    cand.setdefault(p.neg[j], len(cand))
        texts = list(cand)
        labels = np.array([cand[p.pos] for p in ps], np.int32)
        allowed = np.zeros((batch_size, cols), bool)
        allowed[:, : len(texts)] = True
        for i, p in enumerate(ps):
            for g in gold[p.query]:
                if g != p.pos and g in cand:
                    allowed[i, cand[g]] = False
        q_ids, q_mask = pad(tokens.ids([p.query for p in ps]), max_query, bucket)
        t_ids, t_mask = pad(tokens.ids(texts), max_tool, bucket, rows=cols)
        out.append(Batch(q_ids, q_mask, t_ids, t_mask, labels, allowed))
    return out
