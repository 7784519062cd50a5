#!/bin/bash
# refused23.sh LABEL DIR [H2CTL]: bodies of 1 KiB DATA frames after a 401
# (h2ctl20 -mode refused -frame 1024 -per 64 -conns 64, 10 s, no token)
# against the HTTP listener of a start13a.sh daemon with TLS=1 in DIR,
# bob's victim beside; prints the daemon's CPU over the probe (from
# /proc), the client's (user, sys), the load, the daemon's RSS, the
# victim's line and the probe's counts. H2CTL: the built h2ctl20
# (default /tmp/h2ctl20: go build -o /tmp/h2ctl20 ./tools/hostile/h2ctl20).
set -eu
L=$1; D=$2; H2CTL=${3:-/tmp/h2ctl20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$D/env"
out=$(mktemp -d)
c0=$(awk '{print $14+$15}' /proc/$PID/stat)
python3 "$ROOT/tools/hostile/victim16a.py" "$D" 12 bob > "$out/v" 2>&1 &
vp=$!
sleep 1
/usr/bin/time -f '%U %S' -o "$out/t" "$H2CTL" -addr "$HTTP" -mode refused -frame 1024 -per 64 -conns 64 -secs 10 > "$out/o" 2>&1
c1=$(awk '{print $14+$15}' /proc/$PID/stat)
wait $vp
echo "$L daemon $(( c1-c0 ))cs client $(cat "$out/t") load $(cut -d' ' -f1 /proc/loadavg) rss $(awk '/VmRSS/{print $2}' /proc/$PID/status)kB | $(tail -1 "$out/v") | $(tail -2 "$out/o" | tr '\n' ' ')"
rm -rf "$out"
