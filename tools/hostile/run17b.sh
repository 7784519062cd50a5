#!/usr/bin/env bash
# run17b.sh [start|stop]: start (or stop) the seventeenth pass (B)'s proxy: startproxy17b.sh with DIR
# (default var/h17b, its tokens file made beforehand), the npm servers of var/npm17b and the memory
# server of /work/main/.cache/mcp-memory, at nice 10.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${DIR:-$ROOT/var/h17b}
case "${1:-start}" in
stop)
  P=$(grep ^PROXY_PID= "$DIR/env" 2>/dev/null | tail -1 | cut -d= -f2 || true)
  [ -n "$P" ] && kill "$P" 2>/dev/null || true
  sleep 3; rm -f "$DIR/env";;
start)
  rm -f "$DIR/env"; : > "$DIR/proxy.log"
  DIR=$DIR MEMORY_JS=${MEMORY_JS:-/work/main/.cache/mcp-memory/node_modules/@modelcontextprotocol/server-memory/dist/index.js} \
    nice -n 10 "$ROOT/tools/hostile/startproxy17b.sh";;
esac
