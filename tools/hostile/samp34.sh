#!/usr/bin/env bash
# samp34.sh DIR SECS [STEP]: classifierd_request_bytes_in_flight, heap, next GC, goroutines, RSS every STEP (1) s.
. "$1/env"; for k in $(seq $(( $2 / ${3:-1} ))); do echo "$(date +%T) $(curl -s http://$METRICS/metrics | grep -E '^classifierd_request_bytes_in_flight|^go_memstats_heap_alloc_bytes |^go_memstats_next_gc_bytes|^go_goroutines' | awk '{printf "%s %.1f  ", substr($1,1,24), ($1 ~ /goroutines/ ? $2 : $2/1048576)}') RSS $(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status) load $(cut -d' ' -f1 /proc/loadavg)"; sleep ${3:-1}; done
