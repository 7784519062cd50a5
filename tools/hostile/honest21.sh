#!/usr/bin/env bash
# honest21.sh DIR (twenty-first pass): the honest clients real users have, one after another, on a daemon of
# start13a.sh (TLS): grpcio (2,000 small Routes on 8 threads, 200 GetIndexInfo, 10 s with keepalive pings every
# second), Node's http2 (2,000 small Routes, 8 at a time; 5 s with a PING and a Route each second) and the
# streamed bodies (Node and httpx: 2,000 pieces of 100 bytes). PY: a python with grpcio and httpx[http2]
# (a venv: python3 -m venv /tmp/v && /tmp/v/bin/pip install grpcio 'httpx[http2]').
D=$1; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-python3}
WHO=m6 "$PY" "$H/grpcio21.py" "$D" many 2000
WHO=m6 "$PY" "$H/grpcio21.py" "$D" big 200
WHO=m6 timeout 60 "$PY" "$H/grpcio21.py" "$D" idle 10 1000
WHO=m7 node "$H/nodeh2_21.js" "$D" many 2000
WHO=m7 timeout 60 node "$H/nodeh2_21.js" "$D" idle 5
WHO=m7 timeout 60 node "$H/nodeh2_21.js" "$D" stream 2000 100
timeout 60 "$PY" "$H/hxstream20.py" "$D" 1 2000 100
