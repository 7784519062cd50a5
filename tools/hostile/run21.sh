#!/usr/bin/env bash
# run21.sh DIR SECS -- probe... (twenty-first pass): the probe under timeout (nice 5) with bob's Route beside
# (victim16a.py DIR SECS+2 bob) on a daemon of start13a.sh; with ONPROXY=1, bob's MCP ping on the proxy of DIR/env
# (mcpvictim21.py, HTTPS when DIR/env has CERT=) instead.
D=$1; S=$2; shift 3
H=$(cd "$(dirname "$0")" && pwd)
. "$D/env"
if [ "${ONPROXY:-0}" = 1 ]; then
  TLS=$([ -n "${CERT:-}" ] && echo 1 || echo 0) python3 "$H/mcpvictim21.py" "$PROXY" "$D/tokens" bob $((S+2)) "$PID" & V=$!
else
  python3 "$H/victim16a.py" "$D" $((S+2)) bob & V=$!
fi
sleep 0.5
timeout $((S+20)) nice -n 5 "$@"
wait $V
