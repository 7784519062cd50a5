#!/usr/bin/env bash
# beside32.sh DIR FILE CONNS SECS PATH [WHO] (thirty-second pass): junk32.sh's flood with no token (WHO -, the default)
# or WHO's on PATH, bob's victim16a.py beside and grpcio21.py's 2,000 Routes (m6) 3 s in.
D=$1; F=$2; C=$3; S=$4; P=$5; W=${6:--}
. $D/env; T=$([ "$W" = - ] || awk -v w=$W '$1==w{print $3}' $D/tokens)
met() { curl -s http://$METRICS/metrics | grep -E '^classifierd_grpc_unread_data_bytes_total|^classifierd_grpc_reset_penalties_total|^classifierd_refused_bodies_past_rate_total|^classifierd_body_bytes_past_share_total' | tr '\n' ' '; echo; }
echo "== $D $F $P token $W conns $C $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"; met
(sleep 1; nice -n 10 python3 $(cd "$(dirname "$0")" && pwd)/victim16a.py $D $((S-2)) bob) &
(sleep 3; s=$(date +%s.%N); WHO=m6 nice -n 10 /tmp/p24v/bin/python $(cd "$(dirname "$0")" && pwd)/grpcio21.py $D many 2000 2>&1 | tail -1; echo "grpcio took $(echo "$(date +%s.%N) - $s" | bc)") &
timeout $((S+20)) nice -n 10 /tmp/p28/h2ctl20 -addr $GRPC -path $P -mode refused -token "$T" -bodyfile $F -ctype application/grpc -frame 1024 -per 48 -conns $C -inflight 1 -secs $S -pid $PID 2>&1 | tail -1
wait; met
