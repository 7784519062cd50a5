#!/usr/bin/env python3
"""hdrmany11a.py: complete HTTP/1.1 heads of many tiny headers (about 60 KiB: N headers "hNNNN: a"),
a valid token (identities from IDS, round robin), then a body declared and held (1 byte of
Content-Length 1000) for HOLD s, on CONNS connections to --http-listen or an MCP listener; prints the
answers seen, the target's RSS and goroutines. usage: hdrmany11a.py DIR TARGET(HTTP|MCP|PROXY) CONNS HOLD IDS..."""
import os, sys, time, socket, re, urllib.request
d, target, conns, hold, ids = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID'] if target == 'PROXY' else env['PID']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    return 'RSS %d MB (peak %d)' % (s['VmRSS'], s['VmHWM'])
h, p = env[target].split(':')
path = b'/mcp' if target != 'HTTP' else b'/classifier.v1.ClassifierService/Route'
hdrs = b''.join(b'h%d: a\r\n' % i for i in range(int(os.environ.get('N', '6500'))))
print('head bytes', len(hdrs), 'before', st(), flush=True)
socks = []; t0 = time.time()
for i in range(conns):
    who = ids[i % len(ids)]
    s = socket.socket(); s.settimeout(0.01)
    try:
        s.connect((h, int(p)))
        s.sendall(b'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: 1000\r\n\r\n{' % (path, tok[who].encode(), hdrs))
        socks.append(s)
    except Exception as e:
        pass
print('sent %d in %.1fs' % (len(socks), time.time() - t0), st(), flush=True)
seen = {}
for k in range(hold // 2):
    time.sleep(2)
    for s in socks:
        try:
            b = s.recv(100)
            if b: seen[b.split(b'\r\n')[0]] = seen.get(b.split(b'\r\n')[0], 0) + 1
        except Exception:
            pass
    print('%2ds' % (2 * k + 2), st(), flush=True)
print('answers', seen)
for s in socks: s.close()
time.sleep(2); print('after close', st())
