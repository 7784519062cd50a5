#!/usr/bin/env bash
# pace21.sh BIN LABEL PORTBASE CONNS PACE CTRL [H|G|M]: a TLS daemon of BIN
# (start13a.sh in /tmp/pace21/LABEL-PORTBASE), then CONNS HTTP/2
# connections each sending PACE control frames of kind CTRL a second
# (h2ctl20 -pace) for 20 s to the HTTP/JSON (H), gRPC (G) or MCP (M)
# listener with no token, bob's Route (victim16a.py) beside it; prints
# both, and the reads held.
set -u
BIN=$1 LABEL=$2 PB=$3 CONNS=$4 PACE=$5 CTRL=$6 L=${7:-H}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=/tmp/pace21/$LABEL-$PB; rm -rf "$D"; mkdir -p /tmp/pace21
[ -x /tmp/pace21/h2ctl20 ] || (cd "$ROOT" && go build -o /tmp/pace21/h2ctl20 ./tools/hostile/h2ctl20)
DIR=$D TLS=1 PORTBASE=$PB BIN=$BIN bash "$ROOT/tools/hostile/start13a.sh" >/dev/null
. "$D/env"
case $L in H) A=$HTTP;; G) A=$GRPC;; M) A=$MCP;; esac
sleep 2
python3 "$ROOT/tools/hostile/victim16a.py" "$D" 22 bob > "$D/victim.out" 2>&1 &
VP=$!
sleep 1
timeout 40 /tmp/pace21/h2ctl20 -addr "$A" -mode ctrl -ctrl "$CTRL" -pace "$PACE" -conns "$CONNS" -secs 20 -pid "$PID" > "$D/probe.out" 2>&1
wait $VP
echo "$LABEL conns=$CONNS pace=$PACE ctrl=$CTRL L=$L"; cut -c1-400 "$D/probe.out"; tail -1 "$D/victim.out"
curl -s "http://$METRICS/metrics" | grep -E '^classifierd_http2_throttled_reads_total'
kill "$PID"; wait "$PID" 2>/dev/null
