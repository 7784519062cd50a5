#!/usr/bin/env bash
# stallv33.sh DIR TOKENS STREAMS [SECS] (thirty-third pass): TOKENS identities (m20, m21, ...) each hold one connection
# of STREAMS reflection streams stopped in SendMsg (stall33.py: the client reads no answer; 6 file_containing_symbol
# requests a stream, then a partial seventh); from +4 s bob's small HTTP Routes (victim16a.py, 8 s) and then m6's
# 500 gRPC Routes by grpcio (grpcio21.py many 500) beside them. Prints the admission metrics before and after.
set -u
D=$1; T=$2; N=$3; S=${4:-20}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}
. "$D/env"
am() { curl -s http://$METRICS/metrics | grep -E '^classifierd_admission_(in_flight|long_in_flight|refused_total|queue)' | awk '{printf "%s %s  ", $1, $2}'; echo; }
echo "== $D tokens $T streams $N $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"; am
for i in $(seq 0 $((T-1))); do timeout $((S+30)) nice -n 10 $PY $H/stall33.py "$D" m$((20+i)) 1 "$N" "$S" > /tmp/stallv33_$i.log 2>&1 & done
sleep 4; am
nice -n 10 $PY $H/victim16a.py "$D" 8 bob 2>&1 | tail -2
WHO=m6 nice -n 10 $PY $H/grpcio21.py "$D" many 500 2>&1 | tail -2
am; wait
for i in $(seq 0 $((T-1))); do tail -1 /tmp/stallv33_$i.log | cut -c1-250; done
