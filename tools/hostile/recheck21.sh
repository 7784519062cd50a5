#!/usr/bin/env bash
# recheck21.sh BIN LABEL PORTBASE: the twenty-first hostile pass's findings, one after another,
# against one TLS daemon of BIN (start13a.sh in /tmp/recheck21/LABEL-PORTBASE), bob's Route beside
# each; the probes built into /tmp/p21t first (go build -o /tmp/p21t/NAME ./tools/hostile/NAME for
# h2ctl20 and h2burst21). Node 20 for nodeh2_21.js.
set -u
BIN=$1 LABEL=$2 PB=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
D=/tmp/recheck21/$LABEL-$PB; rm -rf $D; mkdir -p /tmp/recheck21
DIR=$D TLS=1 PORTBASE=$PB BIN=$BIN bash tools/hostile/start13a.sh >/dev/null
. $D/env
CAROL=$(awk '$1=="carol"{print $3}' $D/tokens)
sleep 2
echo "== $LABEL f4: lone Node stream 20000 x 10"
( time node tools/hostile/nodeh2_21.js $D stream 20000 10 ) 2>&1 | grep -E "real|status|200|error" | head -3
sleep 3
echo "== $LABEL f2: Node stream 2000 x 100 beside 100 paced conns (HTTP)"
T=/tmp/p21t DELAY=8 WHO=m4 bash tools/hostile/beside21.sh $D HTTP 100 25 -- node tools/hostile/nodeh2_21.js $D stream 2000 100 2>&1 | grep -E "honest|took|status|error|h2p|throttled" | cut -c1-250
sleep 32
echo "== $LABEL f2b: Node stream 2000 x 100 beside 1000 paced conns (GRPC flood)"
T=/tmp/p21t DELAY=8 bash tools/hostile/beside21.sh $D GRPC 1000 25 -- node tools/hostile/nodeh2_21.js $D stream 2000 100 2>&1 | grep -E "honest|took|status|error|h2p|throttled" | cut -c1-250
sleep 32
echo "== $LABEL f1: GET / over h2, 4 conns"
bash tools/hostile/run21.sh $D 10 -- /tmp/p21t/h2burst21 -addr $HTTP -mode credit -path / -n 0 -conns 4 -secs 10 -pid $PID 2>&1 | cut -c1-300
sleep 32
echo "== $LABEL f3: carol MCP past rate over h2, 4 conns"
bash tools/hostile/run21.sh $D 10 -- /tmp/p21t/h2burst21 -addr $MCP -mode credit -path /mcp -token $CAROL -n 0 -conns 4 -secs 10 -pid $PID 2>&1 | cut -c1-300
sleep 32
echo "== $LABEL rst: 1 KiB DATA after 401, 64 conns"
bash tools/hostile/run21.sh $D 10 -- /tmp/p21t/h2ctl20 -addr $HTTP -mode refused -frame 1024 -per 64 -conns 64 -secs 10 -pid $PID 2>&1 | cut -c1-300
kill $PID; wait $PID 2>/dev/null
