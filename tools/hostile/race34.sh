#!/usr/bin/env bash
# race34.sh DIR [SECS] (thirty-fourth pass): race33.sh's mixed floods plus what 26a147a / 9f46bba changed: reflection
# streams stopped in SendMsg with a partial request and their side ended (stall34.py END=1, m20, 4 × 16), the same
# not ended (END=0, m21), and pass 32's partial 4 MiB reflection seconds from two identities (hold32.py m22/m23 1 × 64).
set -u
D=$1; S=${2:-15}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}; O=$D/race34; mkdir -p $O
END=1 GAP=1 nice -n 10 $PY $H/stall34.py $D m20 4 16 $S > $O/stall_end.out 2>&1 &
END=0 GAP=1 nice -n 10 $PY $H/stall34.py $D m21 4 16 $S > $O/stall.out 2>&1 &
for i in 22 23; do SHORT=1 FIRST=00000000023a00 nice -n 10 $PY $H/hold32.py $D m$i 1 64 $S 4095 /grpc.reflection.v1.ServerReflection/ServerReflectionInfo > $O/hold32_$i.out 2>&1 & done
bash $H/race33.sh "$D" "$S"
wait
for f in $O/*.out; do echo "== $(basename $f): $(tail -1 $f | cut -c1-300)"; done
echo "DATA RACE / fatal error / panic lines: $(grep -c 'DATA RACE\|fatal error\|panic' $(. $D/env; echo $DIR)/daemon.log)"
