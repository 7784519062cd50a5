#!/usr/bin/env bash
# probe.sh SECONDS: another client's small Route over HTTP/JSON (token bob)
# every 0.2 s while an attack runs; prints p50/max latency, non-200 count,
# and the daemon's VmRSS/VmHWM before and after. Reads var/h/env.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "${DIR:-$ROOT/var/h}/env"
TOK=$(awk '$1=="bob"{print $3}' "${DIR:-$ROOT/var/h}/tokens")
end=$(( $(date +%s) + ${1:-20} ))
rm -f /tmp/probe.$$
while [ "$(date +%s)" -lt $end ]; do
  curl -s -o /dev/null -m 10 -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' \
    -d '{"query":"list my open github pull requests"}' "http://$HTTP/classifier.v1.ClassifierService/Route" >> /tmp/probe.$$
  sleep 0.2
done
sort -k2 -n /tmp/probe.$$ | awk '{t[NR]=$2; if($1!="200")bad++} END{printf "probe: n=%d p50=%.1fms max=%.1fms non200=%d\n", NR, t[int((NR+1)/2)]*1000, t[NR]*1000, bad}'
rm -f /tmp/probe.$$
