#!/usr/bin/env python3
"""sess16b.py DIR N S G: identities i0..i(N-1) each open S sessions on the proxy (8 at once, never
ended), then G of those sessions each hold a standalone GET event stream open (raw sockets, never
read); bob's session (opened before) keeps calling search_tools throughout. Prints the statuses, the
proxy's RSS/CPU/goroutines/open fds, bob's p50/p99 per phase and whether bob can still open a session."""
import os, sys, json, time, socket, threading, urllib.request
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, N, S, G = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']; met = env['PROXY_METRICS']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    try: m = urllib.request.urlopen(f'http://{met}/metrics', timeout=5).read().decode().splitlines(); g = [l.split()[1] for l in m if l.startswith(('go_goroutines ', 'classifierd_proxy_sessions '))]
    except Exception: g = '?'
    return 'RSS %d MB (peak %d) cpu %.1fs goroutines,sessions %s fds %d load %s' % (s['VmRSS'], s['VmHWM'], (int(f[11]) + int(f[12])) / 100, g, len(os.listdir(f'/proc/{pid}/fd')), open('/proc/loadavg').read().split()[0])
bs = mcp10.Session(env['PROXY'], tok['bob']); lat = []; errs = {}; stop = [False]
def bob():
    while not stop[0]:
        t = time.time()
        try: code, r = bs.tool('search_tools', {'query': 'open a pull request'}); ok = code == 200 and 'result' in r
        except Exception as e: code, ok = type(e).__name__, False
        lat.append((time.time() - t) * 1000)
        if not ok: errs[code] = errs.get(code, 0) + 1
        time.sleep(0.05)
def q():
    l = sorted(lat); lat.clear(); e = dict(errs); errs.clear()
    return '%d calls p50 %.1f p99 %.1f max %.0f ms errors %s' % (len(l), l[len(l) // 2], l[min(len(l) - 1, int(.99 * len(l)))], l[-1], e) if l else 'none'
bt = threading.Thread(target=bob); bt.start(); time.sleep(8); print('before', st(), '\n  bob', q(), flush=True)
codes = {}; sids = []; lock = threading.Lock()
def one(k):
    who = 'i%d' % (k % N)
    try:
        s = mcp10.Session(env['PROXY'], tok[who], timeout=60); c = s.init[0]
        with lock:
            codes[c] = codes.get(c, 0) + 1
            if s.sid: sids.append((who, s.sid))
    except Exception as e:
        with lock: codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1
t0 = time.time()
with ThreadPoolExecutor(8) as ex: list(ex.map(one, range(N * S)))
print('%d initialize in %.1f s: %s' % (N * S, time.time() - t0, codes), st(), '\n  bob', q(), flush=True)
h, p = env['PROXY'].split(':'); socks = []; seen = {}
for who, sid in sids[:G]:
    s = socket.create_connection((h, int(p))); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f'GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {tok[who]}\r\nMcp-Session-Id: {sid}\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n'.encode()); socks.append(s)
time.sleep(10)
for s in socks:
    s.settimeout(0.2)
    try: l = s.recv(64).split(b'\r\n')[0]
    except Exception as e: l = type(e).__name__.encode()
    seen[l] = seen.get(l, 0) + 1
print('%d GET streams held 10 s: %s' % (len(socks), seen), st(), '\n  bob', q(), flush=True)
nb = mcp10.Session(env['PROXY'], tok['bob']); print('bob opens a new session:', nb.init[0], 'old one answers:', bs.tool('search_tools', {'query': 'x'})[0])
for s in socks: s.close()
stop[0] = True; bt.join(); time.sleep(2); print('after', st())
