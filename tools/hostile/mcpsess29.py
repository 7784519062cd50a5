#!/usr/bin/env python3
"""mcpsess29.py DIR WHO N [NVALS] (twenty-ninth pass): WHO opens N MCP sessions on DIR/env's --mcp-listen (initialize and
notifications/initialized on one HTTP/1.1 keep-alive connection, a new one when told to close, paced under
--mcp-requests-per-second), never ending them (with NVALS, each session then makes one tools/call of route whose arguments hold
"x": NVALS zeros, as mcpargs28.py's, and is left); prints the statuses, the first non-200 answer, the daemon's
VmRSS before and after (MB), classifierd_mcp_sessions and the load."""
import http.client, json, ssl, sys, time, urllib.request
d, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3]); nv = int(sys.argv[4]) if len(sys.argv) > 4 else 0
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = [l.split()[2] for l in open(d + '/tokens') if l.split()[0] == who][0]
h, p = env['MCP'].split(':'); pid = env['PID']
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
H = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'Authorization': 'Bearer ' + tok}
rss = lambda: int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
def sessions():
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode()
    return [l for l in m.splitlines() if l.startswith(('classifierd_mcp_sessions ', 'go_memstats_heap_inuse_bytes', 'go_goroutines'))]
r0 = rss(); s0 = sessions(); c = None; codes = {}; seen = set(); t0 = time.time()
for i in range(n):
    time.sleep(max(0, t0 + i * 0.021 - time.time()))
    try:
        if c is None: c = http.client.HTTPSConnection(h, int(p), context=ctx, timeout=10)
        init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {},
                'clientInfo': {'name': 'sess29-%d' % i, 'version': '1'}}}
        c.request('POST', '/mcp', json.dumps(init), H); r = c.getresponse(); b = r.read()
        codes[r.status] = codes.get(r.status, 0) + 1
        if r.status != 200 and r.status not in seen: seen.add(r.status); print(r.status, b[:200])
        sid = r.getheader('Mcp-Session-Id')
        if r.getheader('Connection') == 'close': c.close(); c = None; continue
        if sid:
            c.request('POST', '/mcp', json.dumps({'jsonrpc': '2.0', 'method': 'notifications/initialized'}),
                      {**H, 'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': '2025-06-18'}); r = c.getresponse(); r.read()
            if r.getheader('Connection') == 'close': c.close(); c = None; continue
            if nv:
                call = {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call', 'params': {'name': 'route', 'arguments': {'query': 'list files', 'x': [0] * nv}}}
                c.request('POST', '/mcp', json.dumps(call, separators=(',', ':')), {**H, 'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': '2025-06-18'})
                r = c.getresponse(); r.read(); k = 'call %d' % r.status; codes[k] = codes.get(k, 0) + 1
                if r.getheader('Connection') == 'close': c.close(); c = None
    except Exception as e:
        codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1; c = None
time.sleep(1)
print('%s %d sessions asked in %.1f s: %s; RSS %d -> %d MB; %s -> %s; load %s' % (who, n, time.time() - t0, codes, r0, rss(), s0, sessions(),
      open('/proc/loadavg').read().split()[0]))
