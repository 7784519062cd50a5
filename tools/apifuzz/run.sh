#!/usr/bin/env bash
# Fuzz the HTTP/JSON API against its generated OpenAPI description
# (gen/openapi/openapi.yaml) with schemathesis: a live daemon with the real
# model on the default catalog, a bounded number of examples per operation
# (APIFUZZ_EXAMPLES, default 25), a fixed seed. A 5xx or a response that
# breaks the schema fails. Used by `make test-openapi`.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/bin}
venv=${APIFUZZ_VENV:-$root/.cache/venv-apifuzz}
examples=${APIFUZZ_EXAMPLES:-25}
: "${MODEL_DIR:?set MODEL_DIR}" "${ORT_LIB:?set ORT_LIB}"

tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

"$bin/gen-index" --catalog "$root/data/catalogs/default.json" --model "$MODEL_DIR" --out "$tmp/default.idx" --ort-lib "$ORT_LIB" >/dev/null
http="127.0.0.1:$(freeport)"
"$bin/classifierd" --index "$tmp/default.idx" --model "$MODEL_DIR" --ort-lib "$ORT_LIB" \
  --listen "127.0.0.1:$(freeport)" --http-listen "$http" --log-level warn 2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 1 300); do
  curl -fsS -o /dev/null "http://$http/" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/daemon.log"; echo "classifierd exited"; exit 1; }
  sleep 0.1
done

# not_a_server_error: no 5xx, whatever is sent; response_schema_conformance:
# every answer (success or google.rpc.Status error) matches the description.
status=0
cd "$tmp" # schemathesis keeps state in ./.schemathesis
"$venv/bin/schemathesis" run "$root/gen/openapi/openapi.yaml" --url "http://$http" \
  --checks not_a_server_error,response_schema_conformance \
  --max-examples "$examples" --seed 18 --phases examples,coverage,fuzzing \
  --request-timeout 30 --generation-database none --no-color || status=$?
if grep -q "panic" "$tmp/daemon.log"; then
  cat "$tmp/daemon.log"
  echo "classifierd logged a panic"
  exit 1
fi
exit $status
