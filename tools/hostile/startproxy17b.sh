#!/usr/bin/env bash
# startproxy17b.sh: startproxy16b.sh for the seventeenth pass (B), with evilmcp17b.py shared ("evil17", mode DIR/evil17.mode) and per identity ("evil17pi", DIR/evil17pi.mode); startproxy16b.sh was startproxy14b.sh for the sixteenth pass (B): classifierd proxy (BIN) on
# PPORT (default 47110; metrics PPORT+1) with DIR's token file (default var/h16b) and the backends:
# memory per identity and shared, server-everything shared and per identity, server-filesystem per
# identity (DIR/fs/${identity}), the hostile evilmcp16b.py shared ("evil", mode from DIR/evil.mode)
# and per identity ("evilpi", mode from DIR/evilpi.mode, ${identity} in its args), and with
# HTTPEVIL=URL an HTTP backend "evilhttp" (per identity, shared with HTTPISO=shared) at URL
# (evilhttp16b.py). TLS=1 serves TLS (DIR/c.pem). Appends PROXY=, PROXY_METRICS=, PROXY_PID= to DIR/env.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h17b}
BIN=${BIN:-$ROOT/bin/classifierd}
NPM=${NPM:-$ROOT/var/npm17b/node_modules/@modelcontextprotocol}
MEMORY_JS=${MEMORY_JS:-$NPM/server-memory/dist/index.js}
umask 077
mkdir -p "$DIR/pmem" "$DIR/fs" "$DIR/fs/catalog"
for who in alice bob carol caller dave ops $(seq -f 'i%g' 0 39); do
  key=$who-$(printf %s "$who" | sha256sum | cut -c1-12)   # mcpsrc.IdentityKey
  mkdir -p "$DIR/fs/$key"; echo "secret of $who" > "$DIR/fs/$key/secret.txt"
done
[ -f "$DIR/evil.mode" ] || echo normal > "$DIR/evil.mode"
[ -f "$DIR/evilpi.mode" ] || echo normal > "$DIR/evilpi.mode"
[ -f "$DIR/evil17.mode" ] || echo normal > "$DIR/evil17.mode"
[ -f "$DIR/evil17pi.mode" ] || echo normal > "$DIR/evil17pi.mode"
HTTPENTRY=""
[ -n "${HTTPEVIL:-}" ] && HTTPENTRY=",\"evilhttp\":{\"url\":\"$HTTPEVIL\",\"isolation\":\"${HTTPISO:-per-identity}\"}"
cat > "$DIR/proxy.json" <<J
{"mcpServers":{
 "memory":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/pmem/\${identity}.jsonl"},"isolation":"per-identity"},
 "memshared":{"command":"node","args":["$MEMORY_JS"],"env":{"MEMORY_FILE_PATH":"$DIR/pmem/shared.jsonl"},"isolation":"shared"},
 "everything":{"command":"node","args":["$NPM/server-everything/dist/index.js","stdio"],"isolation":"shared"},
 "evmine":{"command":"node","args":["$NPM/server-everything/dist/index.js","stdio"],"isolation":"per-identity"},
 "files":{"command":"node","args":["$NPM/server-filesystem/dist/index.js","$DIR/fs/\${identity}"],"isolation":"per-identity"},
 "evil":{"command":"python3","args":["$ROOT/tools/hostile/evilmcp16b.py","$DIR/evil.mode"],"isolation":"shared"},
 "evilpi":{"command":"python3","args":["$ROOT/tools/hostile/evilmcp16b.py","$DIR/evilpi.mode","\${identity}"],"isolation":"per-identity"},
 "evil17":{"command":"python3","args":["$ROOT/tools/hostile/evilmcp17b.py","$DIR/evil17.mode"],"isolation":"shared"},
 "evil17pi":{"command":"python3","args":["$ROOT/tools/hostile/evilmcp17b.py","$DIR/evil17pi.mode","\${identity}"],"isolation":"per-identity"}$HTTPENTRY}}
J
P=${PPORT:-47610}; M=$((P+1))
TLSARGS=""; [ "${TLS:-0}" = 1 ] && TLSARGS="--tls-cert $DIR/c.pem --tls-key $DIR/c.key"
"$BIN" proxy --config "$DIR/proxy.json" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8" \
  --mcp-listen 127.0.0.1:$P --metrics-listen 127.0.0.1:$M --auth-token-file "$DIR/tokens" --log-level ${LOGLEVEL:-info} $TLSARGS ${EXTRA:-} >>"$DIR/proxy.log" 2>&1 &
printf 'PROXY=127.0.0.1:%s\nPROXY_METRICS=127.0.0.1:%s\nPROXY_PID=%s\n' $P $M $! >> "$DIR/env"
for i in $(seq 300); do grep -q "serving MCP over streamable HTTP" "$DIR/proxy.log" && break; sleep 0.2; done
tail -3 "$DIR/proxy.log" | cut -c1-300
