#!/usr/bin/env python3
"""churn: N short connections to --http-listen, each one small Route with a
token (half of them closed by the client before reading the answer); the
daemon's RSS, fds and goroutines (metrics) before, after and 15 s later.
usage: churn.py DIR N"""
import sys, os, json, socket, time, urllib.request, re
d, n = sys.argv[1], int(sys.argv[2])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']
def st():
    rss = int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode()
    g = re.search(r'^go_goroutines (\S+)', m, re.M)
    return 'RSS %d MB, fds %d, goroutines %s' % (rss, len(os.listdir(f'/proc/{pid}/fd')), g.group(1) if g else '?')
body = json.dumps({'query': 'open a pull request'}).encode()
req = b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (tok['carol'].encode(), len(body), body)
h, p = env['HTTP'].split(':')
print('before', st(), flush=True); t0 = time.time()
for i in range(n):
    s = socket.create_connection((h, int(p)))
    s.sendall(req)
    if i % 2: s.recv(4096)
    s.close()
print('after %d in %.1fs' % (n, time.time() - t0), st(), flush=True)
time.sleep(15); print('15 s later', st())
