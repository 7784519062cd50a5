#!/usr/bin/env bash
# start17a.sh (start13a.sh listening on HOST, default 127.0.0.1): the thirteenth pass's (half A) daemon: start10b.sh's set-up
# (57 token identities: alice, bob, carol, rep, term, caller, ops, m0..m49;
# terminal with sharing, learning in SQLite) in DIR (default var/h13a) on
# fixed ports PORTBASE..PORTBASE+3 (gRPC, HTTP/JSON, MCP, metrics; default
# 42100), TLS on every listener with TLS=1 (a self-signed P-256 certificate
# for 127.0.0.1 made in DIR), EXTRA flags appended. Writes DIR/env like
# start10b.sh (and CERT= with TLS=1), so the earlier probes read it.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h13a}
BIN=${BIN:-$ROOT/bin/classifierd}
B=${PORTBASE:-42100}; HOST=${HOST:-127.0.0.1}
mkdir -p "$DIR"; umask 077
if [ ! -f "$DIR/tokens" ]; then
  t() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
  {
    echo "alice route,sessions,terminal,report $(t)"
    echo "bob route,sessions,terminal $(t)"
    echo "carol route $(t)"
    echo "rep report,route $(t)"
    echo "term terminal $(t)"
    echo "caller route,call $(t)"
    echo "ops * $(t)"
    for i in $(seq 0 49); do echo "m$i route,sessions,terminal,report $(t)"; done
  } > "$DIR/tokens"
fi
G=$B; H=$((B+1)); M=$((B+2)); P=$((B+3))
args=(--index "$ROOT/var/default.idx" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8"
  --ort-lib "$ROOT/.cache/onnxruntime-1.24.3/libonnxruntime.so.1"
  --listen $HOST:$G --http-listen $HOST:$H --mcp-listen $HOST:$M --metrics-listen $HOST:$P
  --terminal --terminal-db "$DIR/state/terminal.db" --terminal-logs "$DIR/logs" --terminal-share-learned
  --learn-db "$DIR/state/learn.db" --log-level ${LOGLEVEL:-info} ${EXTRA:-})
[ "${AUTH:-1}" = 1 ] && args+=(--auth-token-file "$DIR/tokens")
if [ "${TLS:-0}" = 1 ]; then
  [ -f "$DIR/c.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DIR/c.key" \
    -out "$DIR/c.pem" -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,IP:$HOST 2>/dev/null
  args+=(--tls-cert "$DIR/c.pem" --tls-key "$DIR/c.key")
fi
"$BIN" "${args[@]}" >>"$DIR/daemon.log" 2>&1 &
PID=$!
printf 'PID=%s\nGRPC=%s:%s\nHTTP=%s:%s\nMCP=%s:%s\nMETRICS=%s:%s\nDIR=%s\n' $PID $HOST $G $HOST $H $HOST $M $HOST $P "$DIR" > "$DIR/env"
[ "${TLS:-0}" = 1 ] && echo "CERT=$DIR/c.pem" >> "$DIR/env"
for i in $(seq 150); do curl -sf "http://$HOST:$P/metrics" >/dev/null && break; sleep 0.2; done
cat "$DIR/env"
