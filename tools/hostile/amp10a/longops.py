#!/usr/bin/env python3
"""longops: one identity holds CONC concurrent call_tool calls of
server-everything's trigger-long-running-operation (DURATION s, one progress
notification a second, with a progressToken, answers read only at the
end) through the proxy's --mcp-listen, on SERVER (everything: shared,
evmine: per identity); meanwhile another identity's search_tools and a
call_tool everything/echo are timed (p50/p99) and the proxy's RSS and
threads sampled. usage: longops.py DIR CONC DURATION SERVER"""
import sys, os, json, time, threading, socket, statistics
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); import mcp10
d, conc, dur, srv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def st():
    s = {}
    for l in open(f'/proc/{pid}/status'):
        if l.startswith(('VmRSS', 'Threads')): k, v = l.split(':'); s[k] = v.split()[0]
    s['children'] = len(open(f'/proc/{pid}/task/{pid}/children').read().split())
    return s
def victim(secs, out):
    v = mcp10.Session(env['PROXY'], tok['ops'])
    lat = []; errs = 0; t0 = time.time()
    while time.time() - t0 < secs:
        a = time.time(); c, r = v.tool('search_tools', {'query': 'create an issue on github'}); b = time.time()
        c2, r2 = v.tool('call_tool', {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}})
        lat.append(((b - a) * 1000, (time.time() - b) * 1000))
        if c != 200 or c2 != 200 or 'error' in json.dumps(r2)[:200]: errs += 1
        time.sleep(0.05)
    s1 = sorted(x[0] for x in lat); s2 = sorted(x[1] for x in lat)
    out.append('%d calls, %d errors; search_tools p50 %.1f p99 %.1f ms; echo p50 %.1f p99 %.1f ms' % (
        len(lat), errs, s1[len(s1)//2], s1[int(len(s1)*.99)], s2[len(s2)//2], s2[int(len(s2)*.99)]))
out = []; victim(8, out); print('idle:', out[-1], st(), open('/proc/loadavg').read().split()[:3], flush=True)
hog = mcp10.Session(env['PROXY'], tok['caller'])
host, port = env['PROXY'].split(':')
socks = []
for i in range(conc):
    body = json.dumps({'jsonrpc': '2.0', 'id': 1000 + i, 'method': 'tools/call', 'params': {'name': 'call_tool', '_meta': {'progressToken': 'p%d' % i},
        'arguments': {'server': srv, 'tool': 'trigger-long-running-operation', 'arguments': {'duration': dur, 'steps': dur}}}}).encode()
    h = ''.join('%s: %s\r\n' % kv for kv in hog.h.items())
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b'POST /mcp HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n' % (env['PROXY'].encode(), h.encode(), len(body)) + body)
    socks.append(s)
time.sleep(2)
out = []; victim(min(dur - 4, 20), out); print('during %d held calls:' % conc, out[-1], st(), open('/proc/loadavg').read().split()[:3], flush=True)
codes = {}
for s in socks:
    s.settimeout(dur + 30)
    try:
        data = s.recv(200).split(b'\r\n')[0]
    except Exception as e:
        data = repr(e).encode()
    codes[data] = codes.get(data, 0) + 1; s.close()
print('hog answers:', codes, 'after', st())
