#!/usr/bin/env bash
# honest25.sh DIR (twenty-fifth pass): honest clients one after another on a start13a.sh daemon (TLS), each
# timed, for beside24.sh-style runs while the local peer is penalized: grpcio 2,000 Routes (m6), Node http2
# 2,000 Routes (m7), hub22.js 2000 64, browser22.py 20, Node's small-frame upload, then curl with a wrong
# token and then bob's on one connection (prints both statuses; 000: the second request failed).
# PY: a python with grpcio and httpx[http2] (default /tmp/p24v/bin/python).
D=$1; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}; . "$D/env"
t() { local s; s=$(date +%s.%N); "$@" 2>&1 | tail -2 | tr '\n' ' '; echo " [$(echo "$(date +%s.%N) - $s" | bc | cut -c1-5) s]"; }
t env WHO=m6 "$PY" "$H/grpcio21.py" "$D" many 2000
t env WHO=m7 node "$H/nodeh2_21.js" "$D" many 2000
t env WHO=m7 node "$H/hub22.js" "$D" 2000 64
t "$PY" "$H/browser22.py" "$D" 20
t env WHO=m7 timeout 60 node "$H/nodeh2_21.js" "$D" stream 2000 100
BOB=$(awk '$1=="bob"{print $3}' "$D/tokens")
q='{"query":"list files"}'; u=https://$HTTP/classifier.v1.ClassifierService/Route
t curl -sk --http2 -o /dev/null -w '%{http_code} ' -H 'Authorization: Bearer wrong' -H 'Content-Type: application/json' -d "$q" "$u" \
  -: -sk --http2 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BOB" -H 'Content-Type: application/json' -d "$q" "$u"
