#!/usr/bin/env python3
"""bigread14b.py DIR T SECS [WHO]: WHO (default caller) keeps T threads calling call_tool evil/echo
through the proxy, reading every answer (the hostile backend in "bigcall MB"); prints calls, bytes
read, the proxy's RSS peak and CPU."""
import os, sys, json, time, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, T, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]); who = sys.argv[4] if len(sys.argv) > 4 else 'caller'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def rss(): return {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
def cpu(): f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(f[11]) + int(f[12])) / 100
s = mcp10.Session(env['PROXY'], tok[who], timeout=120)
n = [0, 0, 0]; lock = threading.Lock(); t0 = time.time(); c0 = cpu()
def run():
    while time.time() - t0 < secs:
        st, r, _ = s.post({'jsonrpc': '2.0', 'id': next(s.ids), 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': 'evil', 'tool': 'echo', 'arguments': {}}}})
        ok = isinstance(r, dict) and 'result' in r and not r['result'].get('isError')
        with lock:
            n[0] += 1; n[1] += ok; n[2] += len(json.dumps(r)) if ok else 0
            if not ok and n[0] - n[1] <= 2: print('not ok', st, repr(r)[:200], flush=True)
ths = [threading.Thread(target=run) for _ in range(T)]
[t.start() for t in ths]
while any(t.is_alive() for t in ths):
    time.sleep(2); print('%3.0fs' % (time.time() - t0), rss(), 'calls', n[0], 'ok', n[1], flush=True)
print('done: %d calls, %d ok, %.0f MB read; proxy CPU %.1f s in %.0f s, %s, load %s' % (n[0], n[1], n[2] / 1e6, cpu() - c0, time.time() - t0, rss(), open('/proc/loadavg').read().split()[0]))
