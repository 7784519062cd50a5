#!/usr/bin/env bash
# race32.sh DIR [SECS] (thirty-second pass): race31.sh's mixed floods plus what changed on main since: partial
# second messages on the unary GetIndexInfo (hold32.py, m1, 4 x 64 streams, 4 MiB declared) and on reflection streams
# (hold32.py FIRST=list_services SHORT=1, m7, 1 x 16), a third message on WatchExposure (m3), and frames no call reads
# (frames32.py: unknown types, GOAWAY debug data, big SETTINGS, 4 connections each). Then race31.sh's report.
D=$1; S=${2:-15}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}; O=$D/race32; mkdir -p $O
nice -n 10 $PY $H/hold32.py $D m1 4 64 $S > $O/hold.out 2>&1 &
SHORT=1 FIRST=00000000023a00 nice -n 10 $PY $H/hold32.py $D m7 1 16 $S 4095 /grpc.reflection.v1.ServerReflection/ServerReflectionInfo > $O/refl.out 2>&1 &
nice -n 10 $PY $H/hold32.py $D m3 2 32 $S 64 /classifier.v1.ClassifierService/WatchExposure third > $O/watch.out 2>&1 &
for m in unknown goaway settings; do nice -n 10 python3 $H/frames32.py $D $m 4 $S > $O/frames_$m.out 2>&1 & done
bash $H/race31.sh "$D" "$S"
wait
for f in $O/*.out; do echo "== $(basename $f): $(tail -1 $f | cut -c1-300)"; done
echo "DATA RACE / fatal error / panic lines: $(grep -c 'DATA RACE\|fatal error\|panic' $(. $D/env; echo $DIR)/daemon.log)"
