#!/usr/bin/env bash
# beside24.sh DIR -- honest cmd... (twenty-fourth pass): beside22.sh with its output under /tmp/p24t: the
# flood command in $FLOOD (nice -n 10, output to /tmp/p24t/beside.out), after DELAY s (default 4) the honest
# command (nice -n 10), timed; then the flood's last line and the daemon's throttle/early-close counters.
D=$1; shift 2
. "$D/env"
mkdir -p /tmp/p24t
nice -n 10 bash -c "$FLOOD" > /tmp/p24t/beside.out 2>&1 & F=$!
sleep "${DELAY:-4}"
echo "honest start $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"; s=$(date +%s.%N)
nice -n 10 "$@"
echo "honest took $(echo "$(date +%s.%N) - $s" | bc) s"
wait $F; tail -1 /tmp/p24t/beside.out
curl -s "http://$METRICS/metrics" | grep -E "^classifierd_(http2|proxy)_throttled_reads_total|^classifierd_http_early_reset_closes_total" | tr '\n' ' '; echo
