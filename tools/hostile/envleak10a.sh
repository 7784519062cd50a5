#!/usr/bin/env bash
# envleak10a.sh: the daemon's own secrets in its backends' environment.
# Starts a Redis with a password on a free port and the daemon with
# --state redis://127.0.0.1:PORT/0, the password only in
# $CLASSIFIERD_STATE_PASSWORD (as the flag's help suggests), and
# --mcp-servers naming npm's server-everything as the catalog's "filesystem" (shared, as call_tool
# requires); then a token holding only route,call calls call_tool ->
# filesystem/get-env (server-everything's) over --mcp-listen and greps the answer for the
# password. Prints LEAKED or HELD. BIN picks the binary.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/bin/classifierd}
NPM=${NPM:-$ROOT/.cache/npm10/node_modules/@modelcontextprotocol}
D=$(mktemp -d); trap 'kill $DPID $RPID 2>/dev/null; rm -rf "$D"' EXIT
umask 077
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
PASS=redis-pass-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
RP=$(free); redis-server --port $RP --bind 127.0.0.1 --requirepass "$PASS" --save '' --appendonly no --dir "$D" >/dev/null 2>&1 & RPID=$!
TOK=tok-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'); echo "agent route,call $TOK" > "$D/tokens"
echo "{\"mcpServers\":{\"filesystem\":{\"command\":\"node\",\"args\":[\"$NPM/server-everything/dist/index.js\",\"stdio\"],\"isolation\":\"shared\"}}}" > "$D/servers.json"
G=$(free); M=$(free); P=$(free)
CLASSIFIERD_STATE_PASSWORD=$PASS "$BIN" --index "$ROOT/var/default.idx" --model "$ROOT/.cache/models/all-MiniLM-L6-v2-int8" \
  --listen 127.0.0.1:$G --mcp-listen 127.0.0.1:$M --metrics-listen 127.0.0.1:$P --state redis://127.0.0.1:$RP/0 \
  --auth-token-file "$D/tokens" --mcp-servers "$D/servers.json" >"$D/log" 2>&1 & DPID=$!
for i in $(seq 150); do curl -sf "http://127.0.0.1:$P/metrics" >/dev/null && break; sleep 0.2; done
sleep 3
python3 -c "
import sys, json, time; sys.path.insert(0, '$ROOT/tools/hostile/amp10a'); import mcp10
s = mcp10.Session('127.0.0.1:$M', '$TOK')
for i in range(20):
    st, r = s.tool('call_tool', {'server': 'filesystem', 'tool': 'get-env', 'arguments': {}})
    if 'IS_SANDBOX' in json.dumps(r) or 'PATH' in json.dumps(r): break
    time.sleep(1)
print(json.dumps(r))" > "$D/answer"
if grep -q "$PASS" "$D/answer"; then echo "LEAKED: the Redis password ($PASS) is in get-env's answer to a route,call token"; else echo "HELD: $(head -c 300 "$D/answer")"; fi
