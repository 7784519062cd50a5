#!/usr/bin/env python3
"""unreadscrape16a.py HOST:PORT CONNS HOLD [PIPE] [GZIP]: no token: CONNS connections to a plaintext
listener (default --metrics-listen), each with a 2 KB receive buffer, each pipelining PIPE (default
64) GET /metrics (Accept-Encoding: gzip unless GZIP=0) and never reading; held HOLD s, then closed.
What a scrape whose answer is never read holds in the daemon (the metrics server has no write
deadline). SRC=ADDR binds the connections to a source address (another loopback peer)."""
import os, socket, sys, time
host, port = sys.argv[1].rsplit(':', 1); port = int(port)
n, hold = int(sys.argv[2]), float(sys.argv[3]); pipe = int(sys.argv[4]) if len(sys.argv) > 4 else 64
gz = (sys.argv[5] if len(sys.argv) > 5 else '1') != '0'
req = ('GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n' % (port, 'Accept-Encoding: gzip\r\n' if gz else '')).encode() * pipe
cs = []; err = 0
for i in range(n):
    try:
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048); s.settimeout(5)
        if os.environ.get('SRC'): s.bind((os.environ['SRC'], 0))
        s.connect((host, port)); s.sendall(req); cs.append(s)
    except OSError:
        err += 1
print('unreadscrape16a: %d connections open, %d failed; holding %.0f s' % (len(cs), err, hold), flush=True)
time.sleep(hold)
for s in cs: s.close()
