#!/usr/bin/env python3
"""mcph2_22.py ADDR TOKENFILE WHO N [SESSIONS] (twenty-second pass): honest MCP sessions over HTTP/2 (httpx, TLS, certificate not
verified) at https://ADDR/mcp: SESSIONS sessions (default 1) on one client (one connection), each initialize,
notifications/initialized, the event stream GET open beside, tools/list, N tools/call of the first tool (or ping
when none), then DELETE (NOGET=1: no event stream). Prints statuses, errors, the connection's HTTP version and the time taken."""
import sys, os, json, time, threading, httpx
addr, tf, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]); ns = int(sys.argv[5]) if len(sys.argv) > 5 else 1
tok = {l.split()[0]: l.split()[2] for l in open(tf)}
url = 'https://%s/mcp' % addr; codes = {}; errs = {}; vers = set()
H = {'Authorization': 'Bearer ' + tok[who], 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
def bump(d, k): d[k] = d.get(k, 0) + 1
def rpc(c, sid, i, method, params=None):
    h = dict(H); body = {'jsonrpc': '2.0', 'method': method}
    if sid: h['Mcp-Session-Id'] = sid
    if i is not None: body['id'] = i
    if params is not None: body['params'] = params
    r = c.post(url, content=json.dumps(body), headers=h); vers.add(r.http_version); bump(codes, '%s %d' % (method, r.status_code))
    out = None
    if r.status_code == 200 and i is not None:
        t = r.text
        if 'text/event-stream' in r.headers.get('content-type', ''):
            t = [l[5:] for l in t.splitlines() if l.startswith('data:')][-1]
        out = json.loads(t)
        if 'error' in out: bump(errs, '%s %s' % (method, out['error'].get('message', '')[:60]))
    return r, out
def stream(c, sid, stop):
    try:
        with c.stream('GET', url, headers={**H, 'Mcp-Session-Id': sid, 'Accept': 'text/event-stream'}, timeout=httpx.Timeout(30, read=2)) as r:
            bump(codes, 'GET %d' % r.status_code)
            for _ in r.iter_bytes():
                if stop.is_set(): break
    except Exception as e:
        if not stop.is_set() and not isinstance(e, httpx.ReadTimeout): bump(errs, 'GET ' + type(e).__name__)
t0 = time.time()
with httpx.Client(http2=True, verify=False, timeout=30) as c:
    for s in range(ns):
        r, _ = rpc(c, None, 1, 'initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'mcph2_22', 'version': '1'}})
        sid = r.headers.get('mcp-session-id')
        rpc(c, sid, None, 'notifications/initialized')
        stop = threading.Event(); th = threading.Thread(target=stream, args=(c, sid, stop), daemon=True)
        if os.environ.get('NOGET') != '1': th.start()
        _, tl = rpc(c, sid, 2, 'tools/list')
        tools = (tl or {}).get('result', {}).get('tools', [])
        for k in range(n):
            try:
                if tools: rpc(c, sid, 10 + k, 'tools/call', {'name': tools[0]['name'], 'arguments': {}})
                else: rpc(c, sid, 10 + k, 'ping')
            except httpx.HTTPError as e:
                bump(errs, 'call %d %s %s' % (k, type(e).__name__, str(e)[:40]))
        stop.set()
        if th.is_alive(): th.join(5)
        r = c.delete(url, headers={**H, 'Mcp-Session-Id': sid}); bump(codes, 'DELETE %d' % r.status_code)
print('mcph2_22 %s %d sessions x %d calls: %s errors %s %s in %.2f s, load %s' % (who, ns, n, json.dumps(codes, sort_keys=True), json.dumps(errs), sorted(vers), time.time() - t0, open('/proc/loadavg').read().split()[0]))
