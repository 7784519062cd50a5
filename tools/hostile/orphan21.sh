#!/usr/bin/env bash
# orphan21.sh BIN LABEL PORTBASE: a crude WINDOW_UPDATE flood of 704
# HTTP/2 connections on a TLS daemon's --http-listen for 10 s, its client
# killed -9, then the daemon's CPU over the next 25 s (what the
# orphaned sockets' queued frames cost).
set -u
BIN=$1 LABEL=$2 PB=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=/tmp/pace21/orph-$LABEL-$PB; rm -rf "$D"; mkdir -p /tmp/pace21
[ -x /tmp/pace21/h2ctl20 ] || (cd "$ROOT" && go build -o /tmp/pace21/h2ctl20 ./tools/hostile/h2ctl20)
DIR=$D TLS=1 PORTBASE=$PB BIN=$BIN bash "$ROOT/tools/hostile/start13a.sh" >/dev/null
. "$D/env"
sleep 2
cpu() { awk '{print ($14+$15)/100}' "/proc/$PID/stat"; }
/tmp/pace21/h2ctl20 -addr "$HTTP" -mode ctrl -ctrl wu -conns 704 -secs 60 -pid "$PID" > "$D/probe.out" 2>&1 &
PP=$!
sleep 10
c0=$(cpu); kill -9 $PP
sleep 25
c1=$(cpu)
echo "$LABEL: daemon CPU in the 25 s after the flooder died: $(echo "$c1 - $c0" | bc) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
kill "$PID"; wait "$PID" 2>/dev/null
