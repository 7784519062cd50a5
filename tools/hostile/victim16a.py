#!/usr/bin/env python3
"""victim16a.py (victim13a.py printing the first answer of each error status) DIR SECS [WHO]: another identity's (bob's) small Route over --http-listen on one
kept-alive connection (HTTPS when DIR/env has CERT=, certificate not verified), every 50 ms for SECS
s, while a probe runs; prints calls, statuses, p50/p99/max in ms, the daemon's CPU seconds used in
the window, its RSS and the load average."""
import os, sys, json, time, http.client, ssl
d, secs = sys.argv[1], float(sys.argv[2]); who = sys.argv[3] if len(sys.argv) > 3 else 'bob'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']; h, p = env['HTTP'].split(':')
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def rss(): return int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
def conn():
    if 'CERT' in env:
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(h, int(p), timeout=60, context=c)
    return http.client.HTTPConnection(h, int(p), timeout=60)
seen = {}; c = conn(); lat = []; codes = {}; c0 = cpu(); t0 = time.time()
while time.time() - t0 < secs:
    s = time.time()
    try:
        c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': 'open a pull request on github'}),
                  {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok[who]})
        r = c.getresponse(); body = r.read(); codes[r.status] = codes.get(r.status, 0) + 1
        if r.status != 200 and r.status not in seen: seen[r.status] = body[:300]; print("victim %s: %d %s" % (who, r.status, body[:300].decode(errors="replace")), dict(r.getheaders()).get("Retry-After", ""))
    except Exception as e:
        codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1; c = conn()
    lat.append((time.time() - s) * 1000); time.sleep(0.05)
lat.sort()
print('victim %s: %d calls %s p50 %.1f p99 %.1f max %.1f ms; daemon %.1fs CPU in %.0fs, RSS %d MB, load %s' % (
    who, len(lat), codes, lat[len(lat) // 2], lat[int(len(lat) * .99)], lat[-1], cpu() - c0, time.time() - t0, rss(), open('/proc/loadavg').read().split()[0]))
