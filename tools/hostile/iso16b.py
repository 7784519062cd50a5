#!/usr/bin/env python3
"""iso16b.py DIR N SERVER TOOL ARGSJSON [CONC]: identities i0..i(N-1) (scope route,call) each open a
session and call SERVER's TOOL through call_tool (a per-identity server: each starts a backend of its
own), CONC at once (default 8), while bob keeps calling search_tools and his own memory backend's
read_graph (started before). Prints bob's p50/p99 idle (10 s) and during, the answers' statuses, the
proxy's children (processes, their RSS summed), the proxy's RSS and CPU, the time taken."""
import os, sys, json, time, threading, subprocess
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, N, server, tool, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5]); conc = int(sys.argv[6]) if len(sys.argv) > 6 else 8
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = int(env['PROXY_PID'])
def kids():
    out = subprocess.run(['ps', '-e', '-o', 'pid=,ppid=,rss='], capture_output=True, text=True).stdout.split()
    rows = [tuple(map(int, out[i:i + 3])) for i in range(0, len(out), 3)]
    ch = {}; [ch.setdefault(pp, []).append((p, r)) for p, pp, r in rows]
    todo, n, rss = [pid], 0, 0
    while todo:
        for p, r in ch.get(todo.pop(), []): n += 1; rss += r; todo.append(p)
    return n, rss // 1024
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS',))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    n, r = kids()
    return 'proxy RSS %d MB CPU %.1f s; children %d, their RSS %d MB; load %s' % (s['VmRSS'], (int(f[11]) + int(f[12])) / 100, n, r, open('/proc/loadavg').read().split()[0])
bs = mcp10.Session(env['PROXY'], tok['bob'], timeout=120)
print('bob own memory:', bs.tool('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}})[0])
stop = [False]
def bob(secs=None):
    lat = []; errs = {}; t0 = time.time(); i = 0
    while (time.time() - t0 < secs) if secs else not stop[0]:
        i += 1; t = time.time()
        tl, a = (('search_tools', {'query': 'open a pull request'}) if i % 2 else ('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}}))
        try: code, r = bs.tool(tl, a); ok = code == 200 and isinstance(r, dict) and 'result' in r and not r['result'].get('isError')
        except Exception as e: code, r, ok = type(e).__name__, None, False
        lat.append((time.time() - t) * 1000)
        if not ok: errs[tl] = errs.get(tl, 0) + 1
        time.sleep(0.05)
    lat.sort(); q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    return '%d calls p50 %.1f p99 %.1f max %.0f ms errors %s' % (len(lat), q(.5), q(.99), lat[-1], errs)
print('before', st()); print('idle  bob', bob(10), flush=True)
res = {}
def one(k):
    who = 'i%d' % k; t = time.time()
    try:
        s = mcp10.Session(env['PROXY'], tok[who], timeout=120); code, r = s.tool('call_tool', {'server': server, 'tool': tool, 'arguments': args})
        txt = r['result']['content'][0]['text'][:60] if isinstance(r, dict) and 'result' in r else repr(r)[:60]
        key = ('err ' if r.get('result', {}).get('isError') else 'ok ') + (txt if r.get('result', {}).get('isError') else '')
    except Exception as e: key = type(e).__name__
    res[key] = res.get(key, 0) + 1
out = {}
bt = threading.Thread(target=lambda: out.setdefault('b', bob())); bt.start()
t0 = time.time()
with ThreadPoolExecutor(conc) as ex: list(ex.map(one, range(N)))
took = time.time() - t0; stop[0] = True; bt.join()
print('%d identities called %s/%s in %.1f s: %s' % (N, server, tool, took, res))
print('during bob', out['b']); print('after', st())
time.sleep(5); print('after 5 s', st())
