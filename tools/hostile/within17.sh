#!/usr/bin/env bash
# within17.sh BIN PORTBASE: a daemon (start13a.sh, TLS) where carol hogs
# (8 loops of 262 KB Routes, g16a -mode hog) while bob runs 2 loops of
# small Routes without a deadline for 20 s; prints both tallies. Needs
# `go build -o /tmp/g16a ./tools/hostile/g16a`.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/var/w17-$2; rm -rf "$D"
DIR=$D TLS=1 PORTBASE=$2 BIN=$1 "$ROOT/tools/hostile/start13a.sh" >/dev/null 2>&1
. "$D/env"
tok() { awk -v n="$1" '$1==n{print $3}' "$D/tokens"; }
/tmp/g16a -addr "$GRPC" -mode hog -token "$(tok bob)" -conc 2 -size 40 -hold 5s >/dev/null 2>&1 # the cost model learns
nice -n 5 /tmp/g16a -addr "$GRPC" -mode hog -token "$(tok carol)" -conc 8 -size 262000 -hold 22s >"$D/hog.out" 2>&1 &
sleep 2
/tmp/g16a -addr "$GRPC" -mode hog -token "$(tok bob)" -conc 2 -size 40 -hold 20s >"$D/bob.out" 2>&1
wait
echo "carol: $(tail -1 "$D/hog.out")"
echo "bob: $(tail -1 "$D/bob.out")"
kill "$PID"
