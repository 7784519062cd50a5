#!/usr/bin/env python3
"""mcpvals27.py DIR WHO SECS [BODYFILE] (twenty-seventh pass): 8 threads of HTTP/1.1 keep-alive POSTs to DIR/env's
MCP listener (TLS, /mcp) with WHO's token for SECS seconds, each an MCP ping whose params._meta holds 32,700
small values (64 KiB: under MaxElements and the rate of body bytes; the MCP SDK decodes _meta into map[string]any
several times, ~10 ms of the daemon's CPU a call), or BODYFILE's bytes instead (pass 26's mcpping64.json: the same
size of padding). Prints the statuses, the daemon's CPU (DIR/env's PID) and this client's (Python's client is
the bottleneck: a compiled one would cost less)."""
import http.client, json, os, resource, ssl, sys, threading, time
d, who, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = [l.split()[2] for l in open(d + '/tokens') if l.split()[0] == who][0]
h, p = env['MCP'].split(':'); pid = env['PID']
body = open(sys.argv[4], 'rb').read() if len(sys.argv) > 4 else json.dumps(
    {'jsonrpc': '2.0', 'id': 1, 'method': 'ping', 'params': {'_meta': {'x': [0] * 32700}}}, separators=(',', ':')).encode()
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
def dcpu():
    x = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(x[11]) + int(x[12])) / os.sysconf('SC_CLK_TCK')
res = {}; lk = threading.Lock(); end = time.time() + secs
def run():
    c = None
    while time.time() < end:
        try:
            if c is None: c = http.client.HTTPSConnection(h, int(p), context=ctx, timeout=10)
            c.request('POST', '/mcp', body, {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'Authorization': 'Bearer ' + tok})
            r = c.getresponse(); r.read()
            with lk: res[r.status] = res.get(r.status, 0) + 1
            if r.getheader('Connection') == 'close': c.close(); c = None
        except Exception as e:
            with lk: res[type(e).__name__] = res.get(type(e).__name__, 0) + 1
            c = None
d0 = dcpu(); ts = [threading.Thread(target=run) for _ in range(8)]; [t.start() for t in ts]; [t.join() for t in ts]
d1 = dcpu(); ok = res.get(200, 0); ru = resource.getrusage(resource.RUSAGE_SELF); cc = ru.ru_utime + ru.ru_stime
print(f"{len(body)} bytes: {res} daemon CPU {d1-d0:.2f} s, {1000*(d1-d0)/max(ok,1):.2f} ms per 200, client CPU {cc:.2f} s ({(d1-d0)/cc:.2f}x)")
