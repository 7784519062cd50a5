#!/usr/bin/env python3
"""slowread11a.py: HTTP/1.1 slow reader of large answers on --http-listen: CONC connections (4 KB
receive buffers) each POST one Embed of 64 texts (about 0.3 MB of JSON answer) with TOKEN's identity
and read nothing for HOLD s; prints the daemon's RSS, goroutines and another identity's (carol) small
Route p50/max meanwhile. usage: slowread11a.py DIR TOKEN_NAME CONC HOLD"""
import os, sys, json, time, socket, re, threading, statistics, urllib.request, http.client
d, who, conc, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']
def st():
    rss = int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode()
    return 'RSS %d MB goroutines %s' % (rss, re.search(r'^go_goroutines (\S+)', m, re.M).group(1))
h, p = env['HTTP'].split(':')
body = json.dumps({'texts': ['text number %d about opening pull requests and sending slack messages' % i for i in range(64)]}).encode()
req = b'POST /classifier.v1.ClassifierService/Embed HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (tok[who].encode(), len(body), body)
print('before', st())
socks = []
for i in range(conc):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); s.connect((h, int(p))); s.sendall(req); socks.append(s)
lat = []; codes = {}
def victim():
    t_end = time.time() + hold
    while time.time() < t_end:
        t0 = time.time(); c = http.client.HTTPConnection(h, int(p), timeout=60)
        c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': 'open a pull request'}), {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok['carol']})
        r = c.getresponse(); r.read(); lat.append(time.time() - t0); codes[r.status] = codes.get(r.status, 0) + 1; time.sleep(0.2)
t = threading.Thread(target=victim); t.start()
for k in range(hold // 5):
    time.sleep(5); print('%3ds' % (5 * (k + 1)), st())
t.join()
print('carol Route codes', codes, 'p50 %.1f ms max %.1f ms' % (1000 * statistics.median(lat), 1000 * max(lat)))
for s in socks: s.close()
time.sleep(3); print('after close', st())
