#!/usr/bin/env python3
"""ap29.py DIR WHO SECS NCAT [MCP] (twenty-ninth pass): an honest client weighed by its values: AnalyzePrompt with
NCAT valid_categories (short real-looking names) in a loop, one call at a time, for SECS seconds, on DIR/env's
--http-listen (JSON, HTTP/1.1 keep-alive); MCP=1: the MCP tool analyze_prompt on --mcp-listen, paced at 90 calls
a second (under --mcp-requests-per-second). Prints statuses, the first non-200 answer, calls a second, p50."""
import http.client, json, ssl, sys, time
d, who, secs, ncat = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]); mcp = len(sys.argv) > 5 and sys.argv[5] == '1'
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = [l.split()[2] for l in open(d + '/tokens') if l.split()[0] == who][0]
h, p = env['MCP' if mcp else 'HTTP'].split(':')
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
H = {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok}
cats = ['category-%04d' % i for i in range(ncat)]
def conn(): return http.client.HTTPSConnection(h, int(p), context=ctx, timeout=30)
c = conn(); sid = None
if mcp:
    H['Accept'] = 'application/json, text/event-stream'
    c.request('POST', '/mcp', json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'ap29', 'version': '1'}}}), H)
    r = c.getresponse(); r.read(); sid = r.getheader('Mcp-Session-Id'); H.update({'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': '2025-06-18'})
    c.request('POST', '/mcp', json.dumps({'jsonrpc': '2.0', 'method': 'notifications/initialized'}), H); c.getresponse().read()
    body = json.dumps({'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call', 'params': {'name': 'analyze_prompt', 'arguments': {'prompt': 'deploy the web server to staging', 'valid_categories': cats}}})
    path = '/mcp'
else:
    body = json.dumps({'prompt': 'deploy the web server to staging', 'validCategories': cats}); path = '/classifier.v1.ClassifierService/AnalyzePrompt'
codes = {}; seen = set(); lat = []; t0 = time.time(); k = 0
while time.time() - t0 < secs:
    if mcp: time.sleep(max(0, t0 + k / 90 - time.time())); k += 1
    s = time.time()
    try:
        c.request('POST', path, body, H); r = c.getresponse(); b = r.read(); st = r.status
        if st == 200 and mcp and (b'"isError":true' in b or b'"error"' in b[:200]): st = '200 err'
        codes[st] = codes.get(st, 0) + 1
        if st != 200 and st not in seen: seen.add(st); print(st, b[:240])
        if r.getheader('Connection') == 'close': c.close(); c = conn()
    except Exception as e:
        codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1; c = conn()
    lat.append((time.time() - s) * 1000)
lat.sort(); el = time.time() - t0
print('ap29 %s %s %d categories, %d bytes: %s, %.0f calls/s, p50 %.1f ms, load %s' % (who, 'MCP' if mcp else 'HTTP', ncat, len(body), codes,
      len(lat) / el, lat[len(lat) // 2], open('/proc/loadavg').read().split()[0]))
