#!/usr/bin/env python3
"""searchlat14.py DIR SECONDS [WHO]: another caller's search_tools latency through the proxy of
DIR (startproxy13a.sh's env and tokens) while a hostile backend (evilmcp13a.py, proxyevil13a.sh)
works it: one session of WHO (default caller) sends search_tools for a GitHub request back to back
for SECONDS, then prints the count, p50, p99 and max latency, the answers that were errors, and the
proxy's CPU over the window (seconds of CPU per second: the share of a core)."""
import os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, secs = sys.argv[1], float(sys.argv[2])
who = sys.argv[3] if len(sys.argv) > 3 else 'caller'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def cpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
s = mcp10.Session(env['PROXY'], tok[who], timeout=120)
lat, errs = [], 0
c0, t0 = cpu(), time.time()
while time.time() - t0 < secs:
    t = time.time()
    code, r = s.tool('search_tools', {'query': 'open a pull request on github'})
    lat.append(time.time() - t)
    if code != 200 or not isinstance(r, dict) or 'result' not in r or r['result'].get('isError'):
        errs += 1
        if errs <= 2: print('error answer:', code, repr(r)[:300])
c1, t1 = cpu(), time.time()
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print('search_tools (%s) over %.0f s: %d calls, p50 %.3f s, p99 %.3f s, max %.3f s, %d errors; proxy CPU %.1f s (%.2f of a core), load %s' % (
    who, t1 - t0, len(lat), q(0.5), q(0.99), lat[-1], errs, c1 - c0, (c1 - c0) / (t1 - t0), open('/proc/loadavg').read().split()[0]))
