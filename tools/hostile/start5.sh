#!/usr/bin/env bash
# start5.sh: start3.sh's daemon with a chosen binary (BIN, default
# bin/classifierd) and extra flags (EXTRA), in DIR (default var/h5cc), with
# the token file copied from var/h5 so the probes' tokens work.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h5cc}
BIN=${BIN:-$ROOT/bin/classifierd}
mkdir -p "$DIR"; umask 077
[ -f "$DIR/tokens" ] || cp "$ROOT/var/h5/tokens" "$DIR/tokens"
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
G=$(free); H=$(free); M=$(free); P=$(free)
"$BIN" --index "$ROOT/var/default.idx" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8" \
  --listen ${LISTEN_HOST:-127.0.0.1}:$G --http-listen ${LISTEN_HOST:-127.0.0.1}:$H --mcp-listen ${LISTEN_HOST:-127.0.0.1}:$M --metrics-listen 127.0.0.1:$P \
  --terminal --terminal-db "$DIR/state/terminal.db" --terminal-logs "$DIR/logs" --learn-db "$DIR/state/learn.db" \
  --auth-token-file "$DIR/tokens" --log-level ${LOGLEVEL:-info} ${EXTRA:-} >>"$DIR/daemon.log" 2>&1 &
PID=$!
printf 'PID=%s\nGRPC=127.0.0.1:%s\nHTTP=127.0.0.1:%s\nMCP=127.0.0.1:%s\nMETRICS=127.0.0.1:%s\n' $PID $G $H $M $P > "$DIR/env"
for i in $(seq 150); do curl -sf "http://127.0.0.1:$P/metrics" >/dev/null && break; sleep 0.2; done
cat "$DIR/env"
