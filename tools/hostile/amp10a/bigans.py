#!/usr/bin/env python3
"""bigans: answers held for a reader that never reads, through the proxy.
The caller stores about SIZE MB in its own (per-identity) memory server
(create_entities, observations of 1 MB strings), then opens CONC HTTP/1.1
connections with a 4 KB receive buffer, each POSTing call_tool
memory/read_graph, and reads nothing for HOLD seconds; prints the proxy's
RSS peak, and another identity's search_tools p50 meanwhile.
usage: bigans.py DIR SIZE_MB CONC HOLD"""
import sys, os, json, socket, time, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); import mcp10
d, size, conc, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
rss = lambda: int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
s = mcp10.Session(env['PROXY'], tok['caller'], timeout=120)
for i in range(size):
    st, r = s.tool('call_tool', {'server': 'memory', 'tool': 'create_entities', 'arguments': {'entities': [
        {'name': 'big%d' % i, 'entityType': 't', 'observations': [('%d' % i) * (1 << 20)]}]}})
    if i == 0: print('create', st, json.dumps(r)[:120])
t0 = time.time(); st, r = s.tool('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}})
print('one read_graph: %.1fs, %d bytes' % (time.time() - t0, len(json.dumps(r))), 'RSS', rss(), flush=True)
host, port = env['PROXY'].split(':'); socks = []
h = ''.join('%s: %s\r\n' % kv for kv in s.h.items())
peak = [rss()]; stop = [False]
def mon():
    while not stop[0]: peak[0] = max(peak[0], rss()); time.sleep(0.1)
threading.Thread(target=mon).start()
for i in range(conc):
    body = json.dumps({'jsonrpc': '2.0', 'id': 5000 + i, 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': 'memory', 'tool': 'read_graph', 'arguments': {}}}}).encode()
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); c.connect((host, int(port)))
    c.sendall(b'POST /mcp HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n' % (env['PROXY'].encode(), h.encode(), len(body)) + body)
    socks.append(c)
v = mcp10.Session(env['PROXY'], tok['ops']); lat = []
t0 = time.time()
while time.time() - t0 < hold:
    a = time.time(); v.tool('search_tools', {'query': 'create an issue'}); lat.append((time.time() - a) * 1000); time.sleep(0.1)
lat.sort()
print('%d unread read_graph answers: proxy RSS peak %d MB; ops search_tools p50 %.1f ms p99 %.1f ms (%d calls)' % (conc, peak[0], lat[len(lat)//2], lat[int(len(lat)*.99)], len(lat)), 'load', open('/proc/loadavg').read().split()[:3])
for c in socks: c.close()
stop[0] = True; time.sleep(3); print('after close RSS', rss())
