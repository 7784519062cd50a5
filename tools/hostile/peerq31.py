#!/usr/bin/env python3
"""peerq31.py DIR SECS WHO [THREADS] [BACKOFF] (thirty-first pass): one grpcio channel (one HTTP/2 connection on
--listen) of identity WHO: THREADS (default 2) threads sending GetIndexInfo padded to 48 KiB (/tmp/p28/gpok48.bin's
message) which pass WHO's byte rate and are refused RESOURCE_EXHAUSTED at their headers (their bodies are then
DATA no call reads), each thread sleeping BACKOFF s (default 0.5) after a refusal, as a client that backs off
does; and WHO's small Route every 50 ms on the same channel. Run it beside another identity's refused flood from
the same peer (fl28.sh): since 77b5074 the channel's unread bodies wait their turn in the peer's queue. Prints
codes (first message of each), the Route's p50/p99/max and the slowest gap, the daemon's CPU, the load."""
import os, sys, time, threading, grpc
d, secs, who = sys.argv[1], float(sys.argv[2]), sys.argv[3]
nth = int(sys.argv[4]) if len(sys.argv) > 4 else 2; back = float(sys.argv[5]) if len(sys.argv) > 5 else 0.5
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
def cpu(): f = open('/proc/%s/stat' % env['PID']).read().split(); return (int(f[13]) + int(f[14])) / 100
opts = [('grpc.ssl_target_name_override', '127.0.0.1')]
ch = grpc.secure_channel(env['GRPC'], grpc.ssl_channel_credentials(open(env['CERT'], 'rb').read()), opts)
big = open('/tmp/p28/gpok48.bin', 'rb').read()[5:]
q = b'open a pull request on github'; small = b'\x0a' + bytes([len(q)]) + q
info = ch.unary_unary('/classifier.v1.ClassifierService/GetIndexInfo')
route = ch.unary_unary('/classifier.v1.ClassifierService/Route')
codes = {'big': {}, 'route': {}}; lock = threading.Lock(); lat = []; md = [('authorization', 'Bearer ' + tok[who])]
def one(f, req, kind):
    s = time.time()
    try:
        f(req, metadata=md, timeout=40); c = 'OK'
    except grpc.RpcError as e:
        c = e.code().name
        with lock:
            if c not in codes[kind]: print(kind, c, (e.details() or '')[:160], flush=True)
    with lock: codes[kind][c] = codes[kind].get(c, 0) + 1
    return c, (time.time() - s) * 1000
stop = time.time() + secs
def hog():
    while time.time() < stop:
        c, _ = one(info, big, 'big')
        if c != 'OK': time.sleep(back)
ths = [threading.Thread(target=hog) for _ in range(nth)]
c0 = cpu(); t0 = time.time()
for t in ths: t.start()
while time.time() < stop:
    _, ms = one(route, small, 'route'); lat.append(ms); time.sleep(0.05)
for t in ths: t.join()
lat.sort()
print('%s: big %s; route %d calls %s p50 %.1f p90 %.1f p99 %.1f max %.1f ms, %d over 100 ms; daemon %.2fs CPU in %.1fs, load %s' % (
    who, codes['big'], len(lat), codes['route'], lat[len(lat) // 2], lat[int(len(lat) * .9)], lat[int(len(lat) * .99)], lat[-1], sum(x > 100 for x in lat), cpu() - c0,
    time.time() - t0, open('/proc/loadavg').read().split()[0]), flush=True)
