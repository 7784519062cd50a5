#!/usr/bin/env bash
# Start the fifth pass's proxy: classifierd proxy on a free loopback port with
# the token file of start3.sh's DIR, the npm memory server per identity
# (memory) and shared (memshared), metrics on another port. Appends
# PROXY=, PROXY_METRICS= and PROXY_PID= to DIR/env.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h5}
MEMORY_JS=${MEMORY_JS:-/work/main/.cache/mcp-memory/node_modules/@modelcontextprotocol/server-memory/dist/index.js}
umask 077
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
mkdir -p "$DIR/pmem"
cat > "$DIR/proxy.json" <<J
{"mcpServers":{
 "memory":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/pmem/\${identity}.jsonl"},"isolation":"per-identity"},
 "memshared":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/pmem/shared.jsonl"},"isolation":"shared"}}}
J
P=$(free); M=$(free)
"$ROOT/bin/classifierd" proxy --config "$DIR/proxy.json" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8" \
  --mcp-listen 127.0.0.1:$P --metrics-listen 127.0.0.1:$M --auth-token-file "$DIR/tokens" --log-level debug ${EXTRA:-} >>"$DIR/proxy.log" 2>&1 &
printf 'PROXY=127.0.0.1:%s\nPROXY_METRICS=127.0.0.1:%s\nPROXY_PID=%s\n' $P $M $! >> "$DIR/env"
for i in $(seq 150); do curl -sf "http://127.0.0.1:$M/metrics" >/dev/null && break; sleep 0.2; done
tail -3 "$DIR/proxy.log"
