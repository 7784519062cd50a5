#!/usr/bin/env bash
# Start a real classifierd for the hostile pass: every listener on free ports,
# with a token file (AUTH=1, default) or anonymous (AUTH=0). Writes DIR/env.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h}
AUTH=${AUTH:-1}
mkdir -p "$DIR"
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
G=$(free); H=$(free); M=$(free); P=$(free)
args=(--index "$ROOT/var/default.idx" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8"
  --listen 127.0.0.1:$G --http-listen 127.0.0.1:$H --mcp-listen 127.0.0.1:$M --metrics-listen 127.0.0.1:$P
  --terminal --terminal-db "$DIR/terminal.db" --terminal-logs "$DIR/logs" --terminal-share-learned
  --log-level debug)
[ -f "$DIR/mcpservers.json" ] && args+=(--mcp-servers "$DIR/mcpservers.json")
[ "$AUTH" = 1 ] && args+=(--auth-token-file "$DIR/tokens")
"$ROOT/bin/classifierd" "${args[@]}" >"$DIR/daemon.log" 2>&1 &
PID=$!
printf 'PID=%s\nGRPC=127.0.0.1:%s\nHTTP=127.0.0.1:%s\nMCP=127.0.0.1:%s\nMETRICS=127.0.0.1:%s\n' $PID $G $H $M $P > "$DIR/env"
for i in $(seq 100); do curl -sf "http://127.0.0.1:$P/metrics" >/dev/null && break; sleep 0.2; done
cat "$DIR/env"
