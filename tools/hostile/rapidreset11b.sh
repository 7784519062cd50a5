#!/usr/bin/env bash
# rapidreset11b.sh: HTTP/2 rapid reset on the gRPC port with no token (h2f11b -mode rst -reconnect, CONNS connections), alternating daemons OLD and NEW (binaries), ROUNDS times; prints daemon CPU, goroutines and bob's Route p50/p99 during each.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
go build -o bin/h2f11b ./tools/hostile/h2f11b && go build -o bin/g10b ./tools/hostile/g10b
DIR=${DIR:-$ROOT/var/h11rr}; export DIR
for r in $(seq "${ROUNDS:-2}"); do for b in "${OLD:?}" "${NEW:?}"; do
  [ -f "$DIR/env" ] && { . "$DIR/env"; kill "$PID" 2>/dev/null || true; sleep 2; }
  rm -rf "$DIR/state"; BIN=$b LOGLEVEL=info tools/hostile/start10b.sh >/dev/null
  echo "#### $b (round $r)"
  MODES="${MODES:-rst}" ARGS="-reconnect ${ARGS:-}" tools/hostile/frames11b.sh 2>&1 | grep -v "read end"
done; done
. "$DIR/env"; kill "$PID"
