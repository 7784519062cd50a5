#!/usr/bin/env python3
"""fresh14a.py DIR SECS [WHO]: bob's small Route over --http-listen on a NEW HTTPS connection
(HTTP/1.1) per call, every 50 ms, 5 s timeout: what a curl-per-call client sees; prints calls,
statuses, p50/p99/max in ms."""
import os, sys, json, time, http.client, ssl
d, secs = sys.argv[1], float(sys.argv[2]); who = sys.argv[3] if len(sys.argv) > 3 else 'bob'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['HTTP'].split(':')
lat = []; codes = {}; t0 = time.time()
while time.time() - t0 < secs:
    s = time.time()
    try:
        if 'CERT' in env:
            x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE
            c = http.client.HTTPSConnection(h, int(p), timeout=5, context=x)
        else:
            c = http.client.HTTPConnection(h, int(p), timeout=5)
        c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': 'open a pull request on github'}),
                  {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok[who]})
        r = c.getresponse(); r.read(); codes[r.status] = codes.get(r.status, 0) + 1; c.close()
    except Exception as e:
        codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1
    lat.append((time.time() - s) * 1000); time.sleep(0.05)
lat.sort()
print('fresh %s: %d calls %s p50 %.1f p99 %.1f max %.1f ms' % (who, len(lat), codes, lat[len(lat) // 2], lat[int(len(lat) * .99)], lat[-1]))
