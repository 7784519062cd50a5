#!/usr/bin/env python3
"""starve14b.py DIR T SECS [HOG]: HOG (default caller) keeps T threads sending search_tools through
the proxy (T=0: none), while ops checks every 5 s whether the proxy still says a server is indexing
(search_tools' answer) and whether call_tool evil/echo is answered; prints the time evil's tools
became searchable (or never within SECS), the hog's call count and the proxy's CPU."""
import os, sys, json, time, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, T, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]); hog = sys.argv[4] if len(sys.argv) > 4 else 'caller'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def cpu(): f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(f[11]) + int(f[12])) / 100
t0 = time.time(); c0 = cpu(); n = [0]
def run():
    s = mcp10.Session(env['PROXY'], tok[hog], timeout=120); i = 0
    while time.time() - t0 < secs:
        i += 1; s.tool('search_tools', {'query': 'open a pull request on github %d' % i}); n[0] += 1
ths = [threading.Thread(target=run, daemon=True) for _ in range(T)]; [t.start() for t in ths]
o = mcp10.Session(env['PROXY'], tok['ops'], timeout=120); done = None
while time.time() - t0 < secs:
    st, r = o.tool('search_tools', {'query': 'w1 t5'}); txt = json.dumps(r)
    st2, r2 = o.tool('call_tool', {'server': 'evil', 'tool': 't5', 'arguments': {}}); txt2 = json.dumps(r2)
    idx = 'indexing' in txt; print('%4.0fs indexing=%s call=%s' % (time.time() - t0, idx, txt2[60:160]), flush=True)
    if not idx and done is None: done = time.time() - t0; break
    time.sleep(5)
print('evil searchable at', done, 's; hog calls', n[0], '; proxy CPU %.1f s in %.0f s; load %s' % (cpu() - c0, time.time() - t0, open('/proc/loadavg').read().split()[0]))
