#!/usr/bin/env python3
"""embed29.py DIR WHO SECS NTEXTS TEXTBYTES RATE (twenty-ninth pass): an honest client of large bodies: Embed
calls on DIR/env's --http-listen (HTTPS, JSON, HTTP/1.1 keep-alive, one connection, a new one after an error),
each of NTEXTS texts of TEXTBYTES bytes of ordinary words (different each call, so no cache), RATE calls a
second (paced; a call slower than the pace starts the next at once) for SECS seconds, with WHO's token.
Prints statuses, the first answer of each non-200 status, p50/max latency, the body size and the load."""
import http.client, json, os, random, ssl, sys, time
d, who, secs, nt, tb, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}[who]
h, p = env['HTTP'].split(':')
words = 'open pull request github list files deploy server build test commit branch merge review issue token'.split()
def conn():
    c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
    return http.client.HTTPSConnection(h, int(p), timeout=60, context=c)
def text():
    out, n = [], 0
    while n < tb - 12:
        w = random.choice(words) + str(random.randrange(1000)); out.append(w); n += len(w) + 1
    return ' '.join(out)[:tb]
c = conn(); codes = {}; seen = set(); lat = []; t0 = time.time(); k = 0; size = 0
while time.time() - t0 < secs:
    due = t0 + k / rate; k += 1
    if due > time.time(): time.sleep(due - time.time())
    body = json.dumps({'texts': [text() for _ in range(nt)]}); size = len(body)
    s = time.time()
    try:
        c.request('POST', '/classifier.v1.ClassifierService/Embed', body,
                  {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok})
        r = c.getresponse(); b = r.read(); codes[r.status] = codes.get(r.status, 0) + 1
        if r.status != 200 and r.status not in seen:
            seen.add(r.status); print('embed %s: %d %s' % (who, r.status, b[:260].decode(errors='replace')))
        if r.getheader('Connection', '').lower() == 'close': c.close(); c = conn()
    except Exception as e:
        codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1; c = conn()
    lat.append((time.time() - s) * 1000)
lat.sort()
print('embed %s: %d calls of %d bytes %s p50 %.0f max %.0f ms in %.1f s, load %s' % (
    who, len(lat), size, codes, lat[len(lat) // 2], lat[-1], time.time() - t0, open('/proc/loadavg').read().split()[0]))
