#!/usr/bin/env python3
"""inarow18.py DIR CONNS SECS EVERY [BATCH]: the eighteenth pass's HTTP1RefusalsInARow against an
unauthenticated pipelined flood over --http-listen (HTTP/1.1; TLS with ALPN http/1.1 when DIR/env has CERT=): CONNS threads each pipelining BATCH
(64) requests at a time, every EVERY-th a GET / (the explain page, 200, no token) and the others POST
/grpc.health.v1.Health/Check with no token (405); EVERY 0: all 405 (the seventeenth's flood). A 200
every 8th starts the count of refusals in a row again. Prints statuses, connections the daemon closed,
the client's CPU and the daemon's in the window, the load."""
import os, sys, time, socket, ssl, threading, collections, re, resource
d, conns, secs, every = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
batch = int(sys.argv[5]) if len(sys.argv) > 5 else 64
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
h, p = env['HTTP'].split(':'); pid = env['PID']
def cpu(): f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
bad = b'POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}' % env['HTTP'].encode()
good = b'GET / HTTP/1.1\r\nHost: %s\r\n\r\n' % env['HTTP'].encode()
blob = b''.join(good if every and (i % every) == every - 1 else bad for i in range(batch))
codes = collections.Counter(); closes = [0]; lk = threading.Lock()
rx = re.compile(rb'HTTP/1\.1 (\d{3})')
def run(end):
    while time.time() < end:
        s = socket.create_connection((h, int(p)), timeout=10); buf = b''
        if 'CERT' in env:
            x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE; x.set_alpn_protocols(['http/1.1']); s = x.wrap_socket(s, server_hostname=h)
        try:
            while time.time() < end:
                s.sendall(blob); n = 0; buf = b''
                while n < batch:
                    x = s.recv(1 << 16)
                    if not x: raise ConnectionError
                    buf += x; got = rx.findall(buf); n = len(got)
                with lk:
                    for c in got: codes[c.decode()] += 1
        except (ConnectionError, OSError):
            with lk:
                for c in rx.findall(buf): codes[c.decode()] += 1
                closes[0] += 1
        finally: s.close()
c0 = cpu(); l0 = open('/proc/loadavg').read().split()[0]; end = time.time() + secs
ts = [threading.Thread(target=run, args=(end,)) for _ in range(conns)]; [t.start() for t in ts]; [t.join() for t in ts]
ru = resource.getrusage(resource.RUSAGE_SELF); cc = ru.ru_utime + ru.ru_stime; dc = cpu() - c0
print('every %d: %s in %.0f s; connections closed by the daemon %d; client CPU %.1f s, daemon %.1f s (%.2fx); load %s -> %s' % (
    every, dict(codes), secs, closes[0], cc, dc, dc / cc, l0, open('/proc/loadavg').read().split()[0]), flush=True)
