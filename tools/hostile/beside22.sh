#!/usr/bin/env bash
# beside22.sh DIR -- honest cmd... (twenty-second pass): the flood command in $FLOOD (a string, run with
# nice -n 10, its output to /tmp/p22t/beside.out) and after DELAY s (default 5) the honest command beside it
# (nice -n 10), timed; then the flood's lines and the daemon's throttled reads.
D=$1; shift 2
. "$D/env"
nice -n 10 bash -c "$FLOOD" > /tmp/p22t/beside.out 2>&1 & F=$!
sleep "${DELAY:-5}"
echo "honest start $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"; s=$(date +%s.%N)
nice -n 10 "$@"
echo "honest took $(echo "$(date +%s.%N) - $s" | bc) s"
wait $F; cat /tmp/p22t/beside.out
curl -s "http://$METRICS/metrics" | grep -E "^classifierd_(http2|proxy)_throttled_reads_total|^classifierd_http_early_reset_closes_total|^classifierd_grpc_reset_penalties_total"
