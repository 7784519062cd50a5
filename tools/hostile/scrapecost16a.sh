#!/usr/bin/env bash
# scrapecost16a.sh [N]: the daemon's CPU per /metrics scrape (N scrapes, default 400, on one
# keep-alive connection, gzip asked), and the learn store's report count, for DIR (var/h16a).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd); DIR=${DIR:-$ROOT/var/h16a}; . "$DIR/env"; N=${1:-400}
cpu() { awk '{print ($14+$15)/100}' /proc/$PID/stat; }
c0=$(cpu); t0=$(date +%s.%N)
python3 - "$METRICS" "$N" <<'PY'
import socket, sys
h, p = sys.argv[1].rsplit(':', 1); n = int(sys.argv[2])
s = socket.create_connection((h, int(p))); req = f'GET /metrics HTTP/1.1\r\nHost: {sys.argv[1]}\r\nAccept-Encoding: gzip\r\n\r\n'.encode()
for _ in range(n):
    s.sendall(req); got = 0; tail = b''
    while got < 1:
        b = s.recv(1 << 20); x = tail + b; got += x.count(b'HTTP/1.1 '); tail = x[-9:]
PY
c1=$(cpu); t1=$(date +%s.%N)
echo "$N scrapes: daemon $(echo "$c1 $c0 $N $t1 $t0" | awk '{printf "%.2f ms CPU a scrape, %.1f ms wall a scrape", ($1-$2)*1000/$3, ($4-$5)*1000/$3}'); $(curl -s http://$METRICS/metrics | grep -E '^classifierd_learn_reports(_all)? ' | tr '\n' ' ') load $(cut -d' ' -f1 /proc/loadavg)"
