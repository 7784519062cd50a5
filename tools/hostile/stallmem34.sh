#!/usr/bin/env bash
# stallmem34.sh DIR TOKENS CONNS STREAMS SECS [END] (thirty-fourth pass): TOKENS identities (m20, m21, ...) each open
# CONNS connections GAP (default 2.5) s apart of STREAMS reflection streams stopped in SendMsg (stall34.py), each
# sending a partial request of ~63 KiB, then (END=1, the default) ending its side of the stream. Prints
# classifierd_request_bytes_in_flight, the heap (GOGC=20 daemons: close to the live heap) and RSS every 3 s, and
# bob's Route beside from +SECS/2.
set -u
D=$1; T=$2; N=$3; S=$4; SECS=$5; E=${6:-1}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}
. "$D/env"
m() { echo "$(date +%T) $(curl -s http://$METRICS/metrics | grep -E '^classifierd_request_bytes_in_flight|^go_memstats_heap_alloc_bytes |^go_goroutines' | awk '{printf "%s %.1f  ", $1, ($1 ~ /goroutines/ ? $2 : $2/1048576)}') RSS $(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status) MB load $(cut -d' ' -f1 /proc/loadavg)"; }
m
for i in $(seq 0 $((T-1))); do
  END=$E GAP=${GAP:-2.5} timeout $((SECS+60)) nice -n 10 $PY "$H/stall34.py" "$D" m$((20+i)) "$N" "$S" "$SECS" > "/tmp/stallmem34_$i.log" 2>&1 &
done
(sleep $((SECS/2+N*2)); nice -n 10 $PY "$H/victim16a.py" "$D" 5 bob > /tmp/stallmem34_victim.log 2>&1) &
for k in $(seq $(((SECS+N*3)/3+1))); do sleep 3; m; done
wait
for i in $(seq 0 $((T-1))); do tail -1 "/tmp/stallmem34_$i.log" | cut -c1-330; done
echo "bob: $(tail -1 /tmp/stallmem34_victim.log)"
sleep 2; echo after; m
