#!/usr/bin/env bash
# proxyevil16b.sh (proxyevil14b.sh on startproxy16b.sh) MODE...: restart the proxy of DIR (startproxy16b.sh) with the hostile backend
# evilmcp16b.py in MODE (e.g. "names", "many 5000 4", "deep 100000", "flood 10", "bigcall 64",
# "hang"), then print the proxy's start time, RSS, CPU, its log's warnings about the backend, and
# the tools a caller sees (tools/list, search_tools) through tools/hostile/proxyevil13a.py.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h16b}
echo "$*" > "$DIR/evil.mode"
OLD=$(grep ^PROXY_PID= "$DIR/env" 2>/dev/null | tail -1 | cut -d= -f2 || true)
[ -n "$OLD" ] && kill "$OLD" 2>/dev/null && sleep 3
: > "$DIR/proxy.log"; : > "$DIR/env.tmp"; grep -v "^PROXY" "$DIR/env" > "$DIR/env.tmp" 2>/dev/null || true; mv "$DIR/env.tmp" "$DIR/env"
T0=$(date +%s.%N)
DIR=$DIR NPM=${NPM:-/tmp/npm16b/node_modules/@modelcontextprotocol} "$ROOT/tools/hostile/startproxy16b.sh" >/dev/null
for i in $(seq 600); do grep -q "serving MCP over streamable HTTP" "$DIR/proxy.log" && break; sleep 0.5; done
PID=$(grep ^PROXY_PID= "$DIR/env" | tail -1 | cut -d= -f2)
echo "mode '$*': proxy $PID serving after $(echo "$(date +%s.%N) - $T0" | bc) s; RSS $(grep VmRSS /proc/$PID/status | awk '{print $2/1024}') MB; CPU $(awk '{print ($14+$15)/100}' /proc/$PID/stat) s; load $(cut -d' ' -f1 /proc/loadavg)"
grep -i "evil\|warn\|error" "$DIR/proxy.log" | cut -c1-300 | head -${LINES_SHOWN:-12} | cat -v
