#!/usr/bin/env bash
# race33.sh DIR [SECS] (thirty-third pass): race32.sh's mixed floods plus what d65b18f changed: reflection streams
# that receive again in RecvMsg, each holding a partial second request sent in one burst with the first (hold33.py
# EAGER=1, m40, 100 connections of one stream), the same with 64 streams a connection (m41, 2 connections), an
# honest reflection stream kept open beside 64 KiB Routes on its channel (refl33.py, alice) and WatchExposure
# partial second messages (hold32.py, m5). Then race32.sh's report.
set -u
D=$1; S=${2:-15}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}; O=$D/race33; mkdir -p $O
EAGER=1 SHORT=1 FIRST=00000000023a00 nice -n 10 $PY $H/hold33.py $D m40 100 1 $S 63 /grpc.reflection.v1.ServerReflection/ServerReflectionInfo > $O/esc.out 2>&1 &
EAGER=1 SHORT=1 FIRST=00000000023a00 nice -n 10 $PY $H/hold33.py $D m41 2 64 $S 63 /grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo > $O/esc64.out 2>&1 &
nice -n 10 $PY $H/hold32.py $D m5 2 32 $S 4095 /classifier.v1.ClassifierService/WatchExposure > $O/watch2.out 2>&1 &
(timeout $((S*4)) nice -n 10 $PY $H/refl33.py $D alice 300 64 > $O/refl33.out 2>&1) &
bash $H/race32.sh "$D" "$S"
wait
for f in $O/*.out; do echo "== $(basename $f): $(tail -1 $f | cut -c1-300)"; done
echo "DATA RACE / fatal error / panic lines: $(grep -c 'DATA RACE\|fatal error\|panic' $(. $D/env; echo $DIR)/daemon.log)"
