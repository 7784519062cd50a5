#!/usr/bin/env python3
"""notoken16b.py DIR KB T SECS: T threads (nice 10) post KB-kilobyte tools/call bodies with no token to
the proxy's MCP listener on kept-alive connections (reconnecting when closed); prints the statuses, the
proxy's CPU against the client's own, and bob's search_tools p50/p99 before and during."""
import json, time, threading, http.client, resource, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, kb, T, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l); tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
pid = env['PROXY_PID']; h, p = env['PROXY'].split(':')
cpu = lambda: (lambda f: (int(f[11]) + int(f[12])) / 100)(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split())
body = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'name': 'search_tools', 'arguments': {'query': 'x' * (kb << 10)}}}).encode()
bs = mcp10.Session(env['PROXY'], tok['bob'])
def bob(secs):
    lat = []; t0 = time.time()
    while time.time() - t0 < secs:
        t = time.time(); bs.tool('search_tools', {'query': 'open a pull request'}); lat.append((time.time() - t) * 1000); time.sleep(0.05)
    lat.sort(); return 'bob %d calls p50 %.1f p99 %.1f ms' % (len(lat), lat[len(lat) // 2], lat[int(.99 * len(lat))])
print('idle', bob(secs), 'load', open('/proc/loadavg').read().split()[0], flush=True)
st = {}; t0 = time.time(); c0 = cpu(); r0 = resource.getrusage(resource.RUSAGE_SELF)
def run():
    os.nice(0)
    c = http.client.HTTPConnection(h, int(p), timeout=30)
    while time.time() - t0 < secs:
        try:
            c.request('POST', '/mcp', body, {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}); r = c.getresponse(); r.read(); k = r.status
        except Exception as e: k = type(e).__name__; c = http.client.HTTPConnection(h, int(p), timeout=30)
        st[k] = st.get(k, 0) + 1
pid0 = os.fork()
if pid0 == 0:
    os.nice(10); ts = [threading.Thread(target=run) for _ in range(T)]; [t.start() for t in ts]; [t.join() for t in ts]
    ru = resource.getrusage(resource.RUSAGE_SELF); print('  flooder %s, its CPU %.1f s' % (st, ru.ru_utime + ru.ru_stime), flush=True); os._exit(0)
out = bob(secs); os.waitpid(pid0, 0)
print('flood %s; proxy CPU %.1f s in %.0f s; load %s' % (out, cpu() - c0, secs, open('/proc/loadavg').read().split()[0]))
