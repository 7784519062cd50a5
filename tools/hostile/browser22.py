#!/usr/bin/env python3
"""browser22.py DIR RELOADS [WHO] (twenty-second pass): the explain page as a browser loads it, over HTTP/2 (httpx,
TLS, one kept-alive connection): GET /, /explain.css, /explain.js, /favicon.ico, then GetIndexInfo and 5 Routes
(the user's clicks) with WHO's token (default alice); RELOADS times. Prints statuses, connections used and time."""
import sys, time, json, httpx
d, n = sys.argv[1], int(sys.argv[2]); who = sys.argv[3] if len(sys.argv) > 3 else 'alice'
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
base = 'https://' + env['HTTP']; codes = {}; conns = set(); t0 = time.time()
def count(r):
    k = '%s %s' % (r.request.url.path, r.status_code); codes[k] = codes.get(k, 0) + 1
    s = r.extensions.get('network_stream')
    if s is not None: conns.add(id(s))
with httpx.Client(http2=True, verify=False, timeout=30) as c:
    for i in range(n):
        for p in ('/', '/explain.css', '/explain.js', '/favicon.ico'):
            count(c.get(base + p, headers={'accept': '*/*'}))
        h = {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok[who]}
        count(c.post(base + '/classifier.v1.ClassifierService/GetIndexInfo', content='{}', headers=h))
        for q in range(5):
            count(c.post(base + '/classifier.v1.ClassifierService/Route', content=json.dumps({'query': 'open a pull request %d %d' % (i, q)}), headers=h))
        r = c.get(base + '/')
        if r.http_version != 'HTTP/2': codes['not h2'] = codes.get('not h2', 0) + 1
print('browser22 %d reloads: %s, %d connection objects, %.2f s, load %s' % (n, json.dumps(codes, sort_keys=True), len(conns), time.time() - t0, open('/proc/loadavg').read().split()[0]))
