#!/usr/bin/env python3
"""mcpbatchloop13a.py: one identity (WHO, default carol: scope route only) keeps T threads each
POSTing MCP batches (protocol 2025-03-26) of 64 tools/list (3.6 KB, about 0.9 MB answered, read in
full) to the daemon's --mcp-listen (or the proxy's with TARGET=PROXY, WHO=caller) for SECS s, after
SECS s idle (BATCH=1: single requests instead, for comparison); bob times his small Route over --http-listen (keep-alive) idle and meanwhile. Prints
bob's p50/p99, the batches done, the target's CPU seconds and load average in each phase.
SPLIT=1: bob times his calls in a process of his own: in the hog's process his thread waits for the
GIL while the hog's threads parse their 0.9 MB answers (json.loads holds it throughout), which the
faster the target answers the hog, the longer bob's times (the fourteenth pass). NICE=N (with
SPLIT=1): the hog's process runs at nice N, bob's at the nice it was started with, as if the hog's
client ran on another machine than the target and bob (his process and the target keep their
share of the cores from the hog's JSON parsing).
usage: mcpbatchloop13a.py DIR T SECS"""
import os, sys, json, time, threading, http.client
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, T, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
target = os.environ.get('TARGET', 'MCP'); who = os.environ.get('WHO', 'caller' if target == 'PROXY' else 'carol')
pid = env['PROXY_PID'] if target == 'PROXY' else env['PID']
method = os.environ.get('METHOD', 'tools/list'); BATCH = int(os.environ.get('BATCH', '64'))
def cpu(p=pid): f = open(f'/proc/{p}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def victim(secs):
    h, p = env['HTTP'].split(':'); c = http.client.HTTPConnection(h, int(p), timeout=60); lat = []; errs = {}
    t0 = time.time()
    while time.time() - t0 < secs:
        s = time.time()
        try:
            c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': 'open a pull request on github'}),
                      {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok['bob']})
            r = c.getresponse(); r.read()
            if r.status != 200: errs[r.status] = errs.get(r.status, 0) + 1
        except Exception as e:
            errs[type(e).__name__] = errs.get(type(e).__name__, 0) + 1; c = http.client.HTTPConnection(h, int(p), timeout=60)
        lat.append((time.time() - s) * 1000); time.sleep(0.05)
    lat.sort()
    return 'bob Route %d calls p50 %.1f p99 %.1f max %.1f ms %s' % (len(lat), lat[len(lat) // 2], lat[int(len(lat) * .99)], lat[-1], errs or '')
def phase(name, flood):
    stop = [False]; done = [0]; st = {}
    def hog(k):
        s = mcp10.Session(env[target], tok[who], version='2025-03-26'); n = 0
        while not stop[0]:
            n += 1
            b = json.dumps([{'jsonrpc': '2.0', 'id': n * 64 + i, 'method': method} for i in range(BATCH)] if BATCH > 1 else {'jsonrpc': '2.0', 'id': n, 'method': method})
            try:
                code, r, _ = s.post(None, raw=b); st[code] = st.get(code, 0) + 1; done[0] += 1
            except Exception as e:
                st[type(e).__name__] = st.get(type(e).__name__, 0) + 1
    ths = [threading.Thread(target=hog, args=(k,), daemon=True) for k in range(T if flood else 0)]
    [t.start() for t in ths]; time.sleep(1 if flood else 0)
    c0 = cpu(); t0 = time.time()
    v = pool.apply(victim, (secs,)) if pool else victim(secs)
    dt = time.time() - t0
    print('%-6s %s; %s %.1fs CPU in %.1fs; batches %d %s; load %s' % (name, v, target, cpu() - c0, dt, done[0], st, open('/proc/loadavg').read().split()[0]), flush=True)
    stop[0] = True; [t.join(60) for t in ths]
pool = None
if os.environ.get('SPLIT') == '1':
    import multiprocessing
    pool = multiprocessing.get_context('fork').Pool(1); pool.apply(time.sleep, (0,))  # bob's process, started now
    os.nice(int(os.environ.get('NICE', '0')))
phase('idle', False); phase('flood', True); time.sleep(5); phase('after', False)
