#!/usr/bin/env bash
# Start the third hostile pass's daemon: every listener on free loopback
# ports, a token file of seven identities with different scopes, learning in
# SQLite, the terminal service, and the npm memory server behind call_tool
# (isolation shared, as the daemon requires it said). Writes DIR/env and
# DIR/tokens. MEMORY_JS is the memory server's dist/index.js.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h3}
MEMORY_JS=${MEMORY_JS:-/work/main/.cache/mcp-memory/node_modules/@modelcontextprotocol/server-memory/dist/index.js}
mkdir -p "$DIR"
umask 077
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
if [ ! -f "$DIR/tokens" ]; then
  t() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
  {
    echo "alice route,sessions,terminal,report $(t)"
    echo "bob route,sessions,terminal $(t)"
    echo "carol route $(t)"
    echo "rep report $(t)"
    echo "term terminal $(t)"
    echo "caller route,call $(t)"
    echo "ops * $(t)"
  } > "$DIR/tokens"
fi
cat > "$DIR/mcpservers.json" <<J
{"mcpServers":{"memory":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/memory.jsonl"},"isolation":"shared"}}}
J
G=$(free); H=$(free); M=$(free); P=$(free)
args=(--index "$ROOT/var/default.idx" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8"
  --listen 127.0.0.1:$G --http-listen 127.0.0.1:$H --mcp-listen 127.0.0.1:$M --metrics-listen 127.0.0.1:$P
  --terminal --terminal-db "$DIR/state/terminal.db" --terminal-logs "$DIR/logs" --terminal-share-learned
  --learn-db "$DIR/state/learn.db"
  --log-level debug ${EXTRA:-})
[ "${AUTH:-1}" = 1 ] && args+=(--auth-token-file "$DIR/tokens")
[ "${CALL:-0}" = 1 ] && args+=(--mcp-servers "$DIR/mcpservers.json")
"$ROOT/bin/classifierd" "${args[@]}" >>"$DIR/daemon.log" 2>&1 &
PID=$!
printf 'PID=%s\nGRPC=127.0.0.1:%s\nHTTP=127.0.0.1:%s\nMCP=127.0.0.1:%s\nMETRICS=127.0.0.1:%s\n' $PID $G $H $M $P > "$DIR/env"
for i in $(seq 150); do curl -sf "http://127.0.0.1:$P/metrics" >/dev/null && break; sleep 0.2; done
cat "$DIR/env"
