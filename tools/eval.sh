#!/usr/bin/env bash
# make eval: accuracy and calibration on the development datasets and the
# default catalog, all with the model in MODEL_DIR (default: the project's
# default model, as `make -s print-model-dir` names it).
# Reports (JSON) and reliability diagrams (PNG) land in var/eval/.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_DIR=${MODEL_DIR:-$(make -s print-model-dir)}
DATASETS=${DATASETS:-$(cd .. && pwd)/shared/datasets}
OUT=var/eval
mkdir -p "$OUT/data"
GI=bin/gen-index

echo ">> converting development datasets into catalogs and query sets"
go run ./tools/datasets -in "$DATASETS/banking77.json" -format banking77 -out "$OUT/data"
go run ./tools/datasets -in "$DATASETS/banking77.json" -format banking77 -holdout 0.2 -out "$OUT/data"
go run ./tools/datasets -in "$DATASETS/metatool.json" -format metatool -examples-per-tool 5 -out "$OUT/data"
# The multilingual check: an English catalog, queries in some 60 languages
# (make multilingual-data fetches the pinned wheel).
HASS_WHL=${HASS_WHL:-.cache/datasets/home_assistant_intents-2026.10.27-py3-none-any.whl}
go run ./tools/datasets -in "$HASS_WHL" -format hass-intents -out "$OUT/data"

ev() { # name catalog queries
  "$GI" eval --model "$MODEL_DIR" --name "$1" --catalog "$2" --queries "$3" \
    --json "$OUT/$1.json" --png "$OUT/$1.png" --quiet
}
ev default        data/catalogs/default.json               data/catalogs/default.eval.jsonl
ev banking77      "$OUT/data/banking77.catalog.json"     "$OUT/data/banking77.test.jsonl"
ev banking77-oos  "$OUT/data/banking77-oos.catalog.json" "$OUT/data/banking77-oos.test.jsonl"
ev metatool-desc  "$OUT/data/metatool-desc.catalog.json" "$OUT/data/metatool.test.jsonl"
ev metatool-ex5   "$OUT/data/metatool-ex5.catalog.json"  "$OUT/data/metatool.test.jsonl"
ev hass-intents   "$OUT/data/hass-intents.catalog.json"  "$OUT/data/hass-intents.test.jsonl"
# The dev split (single-tool queries disjoint from the test set, and
# two-need prompts joined from pairs of them) is what design choices are
# measured on; its figures are printed for comparison.
ev metatool-desc-dev "$OUT/data/metatool-desc.catalog.json" "$OUT/data/metatool.dev.jsonl"
ev metatool-ex5-dev  "$OUT/data/metatool-ex5.catalog.json"  "$OUT/data/metatool.dev.jsonl"
ev metatool-desc-dev-multi "$OUT/data/metatool-desc.catalog.json" "$OUT/data/metatool.dev-multi.jsonl"
ev metatool-ex5-dev-multi  "$OUT/data/metatool-ex5.catalog.json"  "$OUT/data/metatool.dev-multi.jsonl"

echo ">> routing decisions on every dev catalog: needs, sets, confidence left out one catalog at a time, the seed contract (tools/route-eval)"
go run ./tools/datasets -in "$DATASETS/mcp-routing-dev/mcp_bench.json" -format mcpbench -out "$OUT/data"
go run ./tools/datasets -in "$DATASETS/mcp-routing-dev/msc_bench.json" -format msc -out "$OUT/data"
go run ./tools/datasets -in "$DATASETS/toolret-train/pairs.jsonl.gz" -format toolret -max-queries 600 -out "$OUT/data"
nice -n 10 go run ./tools/route-eval --model "$MODEL_DIR" --data "$OUT/data" --out "$OUT/route" | tee "$OUT/route.txt"

if [ -d tools/terminal-eval ]; then
  echo ">> terminal prompt detection"
  go run ./tools/terminal-eval
fi
echo ">> reports and reliability diagrams in $OUT/"
