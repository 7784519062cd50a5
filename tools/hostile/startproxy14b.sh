#!/usr/bin/env bash
# startproxy13a.sh: startproxy10a.sh on fixed ports (PPORT, PPORT+1; default 42120)
# with, besides, the backend tools/hostile/evilmcp14b.py ("evil", shared; its
# behaviour from DIR/evil.mode) and TLS with TLS=1 (DIR/c.pem). It is
# classifierd proxy (BIN, default bin/classifierd) on a
# free loopback port with DIR's token file and real npm backends: memory
# per identity and shared, server-everything shared and per identity,
# server-filesystem per identity rooted at DIR/fs/${identity}. NPM is the
# directory holding node_modules with server-everything and
# server-filesystem (npm install @modelcontextprotocol/server-everything
# @modelcontextprotocol/server-filesystem). Appends PROXY=, PROXY_METRICS=,
# PROXY_PID= to DIR/env.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h10}
BIN=${BIN:-$ROOT/bin/classifierd}
NPM=${NPM:-$ROOT/.cache/npm10/node_modules/@modelcontextprotocol}
MEMORY_JS=${MEMORY_JS:-/work/main/.cache/mcp-memory/node_modules/@modelcontextprotocol/server-memory/dist/index.js}
umask 077
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
mkdir -p "$DIR/pmem" "$DIR/fs"
mkdir -p "$DIR/fs/catalog"
for who in alice bob carol caller ops; do
  key=$who-$(printf %s "$who" | sha256sum | cut -c1-12)   # mcpsrc.IdentityKey
  mkdir -p "$DIR/fs/$key"; echo "secret of $who" > "$DIR/fs/$key/secret.txt"
done
cat > "$DIR/proxy.json" <<J
{"mcpServers":{
 "memory":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/pmem/\${identity}.jsonl"},"isolation":"per-identity"},
 "memshared":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/pmem/shared.jsonl"},"isolation":"shared"},
 "everything":{"command":"node","args":["$NPM/server-everything/dist/index.js","stdio"],"isolation":"shared"},
 "evmine":{"command":"node","args":["$NPM/server-everything/dist/index.js","stdio"],"isolation":"per-identity"},
 "files":{"command":"node","args":["$NPM/server-filesystem/dist/index.js","$DIR/fs/\${identity}"],"isolation":"per-identity"},
 "evil":{"command":"python3","args":["$ROOT/tools/hostile/evilmcp14b.py","$DIR/evil.mode"],"isolation":"shared"}}}
J
P=${PPORT:-42120}; M=$((P+1))
TLSARGS=""; [ "${TLS:-0}" = 1 ] && TLSARGS="--tls-cert $DIR/c.pem --tls-key $DIR/c.key"
"$BIN" proxy --config "$DIR/proxy.json" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8" \
  --mcp-listen 127.0.0.1:$P --metrics-listen 127.0.0.1:$M --auth-token-file "$DIR/tokens" --log-level ${LOGLEVEL:-info} $TLSARGS ${EXTRA:-} >>"$DIR/proxy.log" 2>&1 &
printf 'PROXY=127.0.0.1:%s\nPROXY_METRICS=127.0.0.1:%s\nPROXY_PID=%s\n' $P $M $! >> "$DIR/env"
for i in $(seq 150); do curl -sf "http://127.0.0.1:$M/metrics" >/dev/null && break; sleep 0.2; done
tail -3 "$DIR/proxy.log"
