#!/usr/bin/env bash
# run22.sh DIR SECS -- probe... (twenty-second pass): run21.sh under nice -n 10 (the probe and bob's
# victim both), for a machine shared with a CI run: the probe under timeout with bob's Route beside
# (victim16a.py DIR SECS+2 bob); ONPROXY=1: bob's MCP ping on DIR/env's PROXY instead.
D=$1; S=$2; shift 3
H=$(cd "$(dirname "$0")" && pwd)
. "$D/env"
if [ "${ONPROXY:-0}" = 1 ]; then
  TLS=$([ -n "${CERT:-}" ] && echo 1 || echo 0) nice -n 10 python3 "$H/mcpvictim21.py" "$PROXY" "$D/tokens" bob $((S+2)) "$PID" & V=$!
else
  nice -n 10 python3 "$H/victim16a.py" "$D" $((S+2)) bob & V=$!
fi
sleep 0.5
timeout $((S+20)) nice -n 10 "$@"
wait $V
