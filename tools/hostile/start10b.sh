#!/usr/bin/env bash
# start10b.sh: the tenth pass's (half B) daemon: start3.sh's set-up (seven
# identities of different scopes, terminal with sharing, learning in SQLite,
# debug log) in DIR (default var/h10b), EXTRA flags appended. Writes DIR/env.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h10b}
BIN=${BIN:-$ROOT/bin/classifierd}
mkdir -p "$DIR"; umask 077
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
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
G=$(free); H=$(free); M=$(free); P=$(free)
args=(--index "$ROOT/var/default.idx" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8"
  --ort-lib "$ROOT/.cache/onnxruntime-1.24.3/libonnxruntime.so.1"
  --listen 127.0.0.1:$G --http-listen 127.0.0.1:$H --mcp-listen 127.0.0.1:$M --metrics-listen 127.0.0.1:$P
  --terminal --terminal-db "$DIR/state/terminal.db" --terminal-logs "$DIR/logs" ${SHARE---terminal-share-learned}
  --learn-db "$DIR/state/learn.db" --log-level ${LOGLEVEL:-debug} ${EXTRA:-})
[ "${AUTH:-1}" = 1 ] && args+=(--auth-token-file "$DIR/tokens")
"$BIN" "${args[@]}" >>"$DIR/daemon.log" 2>&1 &
PID=$!
printf 'PID=%s\nGRPC=127.0.0.1:%s\nHTTP=127.0.0.1:%s\nMCP=127.0.0.1:%s\nMETRICS=127.0.0.1:%s\nDIR=%s\n' $PID $G $H $M $P "$DIR" > "$DIR/env"
for i in $(seq 150); do curl -sf "http://127.0.0.1:$P/metrics" >/dev/null && break; sleep 0.2; done
cat "$DIR/env"
