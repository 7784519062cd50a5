#!/usr/bin/env bash
# esc33.sh DIR TOKENS CONNS SECS [PATH] (thirty-third pass): TOKENS identities (m40, m41, ...) each open CONNS
# connections of ONE reflection stream each (hold33.py EAGER=1: list_services, then a second request's prefix
# declaring 63 KiB and all of it but its last byte, in one burst with the headers, never ending the stream), held
# SECS s; bob's Routes beside from +SECS/2 (victim16a.py, 6 s: they also make the collector run, so that the heap
# read after them is close to the live heap). Prints classifierd_request_bytes_in_flight (what the body budget
# holds), the heap and RSS every 3 s, and after.
set -u
# SHORT=n (default 1): bytes of the partial message never sent (SHORT=64512: its prefix alone, the control).
D=$1; T=$2; N=$3; S=$4; PATH_=${5:-/grpc.reflection.v1.ServerReflection/ServerReflectionInfo}
H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}
. "$D/env"
m() { echo "$(date +%T) $(curl -s http://$METRICS/metrics | grep -E '^classifierd_request_bytes_in_flight|^go_memstats_heap_alloc_bytes |^go_memstats_next_gc_bytes|^go_goroutines' | awk '{printf "%s %.1f  ", $1, ($1 ~ /goroutines/ ? $2 : $2/1048576)}') RSS $(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status) MB load $(cut -d' ' -f1 /proc/loadavg)"; }
m
for i in $(seq 0 $((T-1))); do
  EAGER=1 SHORT=${SHORT:-1} FIRST=00000000023a00 nice -n 10 $PY "$H/hold33.py" "$D" m$((40+i)) "$N" 1 "$S" 63 "$PATH_" > "/tmp/esc33_$i.log" 2>&1 &
done
(sleep $((S/2)); nice -n 10 $PY "$H/victim16a.py" "$D" 6 bob > /tmp/esc33_victim.log 2>&1) &
for k in $(seq $((S/3+2))); do sleep 3; m; done
wait
for i in $(seq 0 $((T-1))); do tail -1 "/tmp/esc33_$i.log"; done
echo "bob: $(tail -1 /tmp/esc33_victim.log)"
nice -n 10 $PY "$H/victim16a.py" "$D" 4 bob > /dev/null 2>&1; echo after; m
