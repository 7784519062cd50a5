#!/usr/bin/env python3
"""backends11a.py: identities within their own backend caps fill the proxy's --max-backends and lock
another identity out of every per-identity server until the hogs' backends idle out (--backend-idle,
10 min). HOGS identities each call one tool on each per-identity server (memory, evmine, files);
then VICTIM calls memory/read_graph every 10 s for WATCH seconds; prints each answer's error, the
live backends (node children of PROXY_PID) and their RSS. usage: backends11a.py DIR VICTIM WATCH HOG..."""
import os, sys, json, time, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, victim, watch, hogs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
addr, pid = env['PROXY'], env['PROXY_PID']
def kids():
    out = subprocess.run(['ps', '--ppid', pid, '-o', 'rss='], capture_output=True, text=True).stdout.split()
    return '%d backends, %d MB' % (len(out), sum(int(x) for x in out) // 1024)
calls = {'memory': ('read_graph', {}), 'evmine': ('echo', {'message': 'x'}), 'files': ('list_allowed_directories', {})}
def err(r):
    try:
        res = r['result']
        return ('ERROR ' + res['content'][0]['text'][:110]) if res.get('isError') else 'ok'
    except Exception:
        return str(r)[:120]
print('before', kids())
for h in hogs:
    s = mcp10.Session(addr, tok[h])
    print(h, [err(s.tool('call_tool', {'server': srv, 'tool': t, 'arguments': a})[1]) for srv, (t, a) in calls.items()])
print('after hogs', kids())
v = mcp10.Session(addr, tok[victim]); t0 = time.time()
while True:
    print('%5.0fs %s memory/read_graph: %s; %s' % (time.time() - t0, victim, err(v.tool('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}})[1]), kids()))
    if time.time() - t0 >= watch: break
    time.sleep(10)
