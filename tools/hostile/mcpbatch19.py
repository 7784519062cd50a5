#!/usr/bin/env python3
"""mcpbatch19.py DIR WHO N: the nineteenth pass's MCP request rate against batches on a start13a.sh
daemon's --mcp-listen (plain): opens a session as WHO, then POSTs batches of N pings on one
kept-alive connection for 5 s, then a request whose id lies after 5 KB of params; prints statuses,
how many pings were answered, and the refusals' ids."""
import os, sys, json, time, http.client, collections
d, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['MCP'].split(':'); c = http.client.HTTPConnection(h, int(p), timeout=30)
H = {'Authorization': 'Bearer ' + tok[who], 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
def post(body, extra={}):
    global c
    try:
        c.request('POST', '/mcp', json.dumps(body), {**H, **extra}); r = c.getresponse(); b = r.read()
        if r.getheader('Connection', '') == 'close': c.close(); c = http.client.HTTPConnection(h, int(p), timeout=30)
        return r.status, r.getheader('Mcp-Session-Id'), b
    except Exception as e:
        c = http.client.HTTPConnection(h, int(p), timeout=30); return type(e).__name__, None, b''
st, sid, b = post({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'b19', 'version': '1'}}})
print('initialize', st, sid)
S = {'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': '2025-06-18'}
post({'jsonrpc': '2.0', 'method': 'notifications/initialized'}, S)
codes = collections.Counter(); answered = 0; t0 = time.time(); sample = {}
while time.time() - t0 < 5:
    st, _, b = post([{'jsonrpc': '2.0', 'id': 1000 + i, 'method': 'ping'} for i in range(n)], S)
    codes[st] += 1; sample.setdefault(st, b[:200])
    try:
        j = json.loads(b[b.index(b'{') if b[:1] != b'[' else 0:] if b[:1] != b'[' else b)
        answered += len(j) if isinstance(j, list) else 1
    except Exception: pass
print('batches of %d in 5 s:' % n, dict(codes), 'messages answered ~%d' % answered)
for k, v in sample.items(): print(' ', k, v)
pad = 'x' * 5000
for i in range(3):
    st, _, b = post({'jsonrpc': '2.0', 'method': 'tools/list', 'params': {'pad': pad}, 'id': 777 + i}, S)
    print('id after 5 KB:', st, b[:160])
