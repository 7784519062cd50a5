#!/usr/bin/env python3
"""victim17a.py DIR WHO SECS THREADS EVERY_MS [TIMEOUT_S] [METHOD] [BODY]: an honest caller over --http-listen
(HTTPS when DIR/env has CERT=, ALPN http/1.1): THREADS threads, each on its own kept-alive connection, each
sending a small Route (or METHOD with BODY) every EVERY_MS ms (open loop: the next one is not delayed by a
refusal; a client serving its own users' requests) with X-Server-Timeout TIMEOUT_S (its deadline; 0 or
absent: none); a 429 is not retried. Prints statuses, answers p50/p99 ms, how many answers closed the
connection (Connection: close) and reconnections, the daemon's CPU in the window and this client's."""
import os, sys, json, time, http.client, ssl, threading, collections, resource
d, who, secs, threads, every = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]) / 1000
tmo = float(sys.argv[6]) if len(sys.argv) > 6 else 0
method = sys.argv[7] if len(sys.argv) > 7 else 'classifier.v1.ClassifierService/Route'
body = sys.argv[8] if len(sys.argv) > 8 else json.dumps({'query': 'open a pull request on github'})
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']; h, p = env['HTTP'].split(':')
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def conn():
    if 'CERT' in env:
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE; c.set_alpn_protocols(['http/1.1'])
        return http.client.HTTPSConnection(h, int(p), timeout=60, context=c)
    return http.client.HTTPConnection(h, int(p), timeout=60)
codes = collections.Counter(); lat = []; first = {}; lk = threading.Lock()
hdr = {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok[who]}
if tmo > 0: hdr['X-Server-Timeout'] = '%.3f' % tmo
def run(end, off):
    c = conn(); nxt = time.time() + off
    while nxt < end:
        time.sleep(max(0, nxt - time.time())); nxt += every
        s = time.time()
        try:
            c.request('POST', '/' + method, body, hdr)
            r = c.getresponse(); b = r.read(); el = (time.time() - s) * 1000
            with lk:
                codes[r.status] += 1
                if r.status == 200: lat.append(el)
                elif r.status not in first: first[r.status] = b[:200].decode(errors='replace')
                if (r.getheader('Connection') or '').lower() == 'close': codes['closed-by-daemon'] += 1
            if (r.getheader('Connection') or '').lower() == 'close': c.close(); c = conn(); codes['reconnect'] += 1
        except Exception as e:
            with lk: codes[type(e).__name__] += 1
            c.close(); c = conn(); codes['reconnect'] += 1
c0, r0, t0 = cpu(), resource.getrusage(resource.RUSAGE_SELF), time.time()
ts = [threading.Thread(target=run, args=(t0 + secs, i * every / threads)) for i in range(threads)]; [t.start() for t in ts]; [t.join() for t in ts]
r1 = resource.getrusage(resource.RUSAGE_SELF)
lat.sort(); q = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))] if lat else 0
print('victim17a %s x%d every %.0f ms timeout %.3fs: %s; 200s p50 %.1f p99 %.1f ms; first %s; daemon %.1fs CPU, client %.1fs in %.0fs; load %s' % (
    who, threads, every * 1000, tmo, dict(codes), q(.5), q(.99), first, cpu() - c0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
    time.time() - t0, open('/proc/loadavg').read().split()[0]))
