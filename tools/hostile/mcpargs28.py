#!/usr/bin/env python3
"""mcpargs28.py DIR WHO SECS TOOL [NVALS] [THREADS] [RATE] (twenty-eighth pass): THREADS (default 8) threads of HTTP/1.1
keep-alive POSTs to DIR/env's MCP listener (TLS, /mcp) with WHO's token for SECS seconds, each thread in its own
MCP session (initialize, notifications/initialized), each POST a tools/call of TOOL whose arguments are the
tool's one small argument plus "x": a list of NVALS zeros (default 32,700: 64 KiB, under MaxElements and the
rate of body bytes; params._meta untouched). NVALS 0: the small call alone; NVALS < 0: one string of -NVALS bytes (padding) in its place. TOOL @FILE: FILE's bytes as each POST instead (ping_params.json: a ping whose params hold "x": 32,700 zeros). RATE: calls a second in all (paced, to stay under --mcp-requests-per-second). Prints the statuses, the JSON-RPC
error or isError seen first, the daemon's CPU (DIR/env's PID) and this client's."""
import http.client, json, os, resource, ssl, sys, threading, time
d, who, secs, tool = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
nv = int(sys.argv[5]) if len(sys.argv) > 5 else 32700; nth = int(sys.argv[6]) if len(sys.argv) > 6 else 8
rate = float(sys.argv[7]) if len(sys.argv) > 7 else 0
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = [l.split()[2] for l in open(d + '/tokens') if l.split()[0] == who][0]
h, p = env['MCP'].split(':'); pid = env['PID']
small = {'route': {'query': 'list files'}, 'search_tools': {'query': 'list files'}, 'analyze_prompt': {'prompt': 'list files'},
         'detect_input_prompt': {'output': 'Password:'}}.get(tool, {})
args = dict(small)
if nv > 0: args['x'] = [0] * nv
if nv < 0: args['x'] = 'a' * (-nv)  # padding: one string of -NVALS bytes
body = open(tool[1:], 'rb').read() if tool.startswith('@') else json.dumps({'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call', 'params': {'name': tool, 'arguments': args}}, separators=(',', ':')).encode()
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
H = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'Authorization': 'Bearer ' + tok}
def dcpu():
    x = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(x[11]) + int(x[12])) / os.sysconf('SC_CLK_TCK')
res = {}; first = {}; lk = threading.Lock(); end = time.time() + secs
def post(c, b, extra):
    c.request('POST', '/mcp', b, {**H, **extra}); r = c.getresponse(); data = r.read(); return r, data
def session(c):
    r, _ = post(c, json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'a28', 'version': '1'}}}), {})
    s = {'Mcp-Session-Id': r.getheader('Mcp-Session-Id') or '', 'Mcp-Protocol-Version': '2025-06-18'}
    post(c, json.dumps({'jsonrpc': '2.0', 'method': 'notifications/initialized'}), s); return s
def run():
    c = None; s = None; nxt = time.time()
    while time.time() < end:
        if rate:
            nxt += nth / rate; dl = nxt - time.time()
            if dl > 0: time.sleep(dl)
        try:
            if c is None:
                c = http.client.HTTPSConnection(h, int(p), context=ctx, timeout=10); s = session(c)
            r, data = post(c, body, s)
            k = r.status
            if r.status == 200:
                k = '200 error' if b'"error"' in data[:300] else ('200 isError' if b'"isError":true' in data else '200 ok')
            with lk:
                res[k] = res.get(k, 0) + 1
                if k not in first: first[k] = data[:240]
            if r.getheader('Connection') == 'close': c.close(); c = None
        except Exception as e:
            with lk: res[type(e).__name__] = res.get(type(e).__name__, 0) + 1
            c = None
d0 = dcpu(); ts = [threading.Thread(target=run) for _ in range(nth)]; [t.start() for t in ts]; [t.join() for t in ts]
d1 = dcpu(); ok = sum(v for k, v in res.items() if str(k).startswith('200')); ru = resource.getrusage(resource.RUSAGE_SELF); cc = ru.ru_utime + ru.ru_stime
for k, v in first.items(): print(k, v)
print(f"{tool} {len(body)} bytes: {res} daemon CPU {d1-d0:.2f} s, {1000*(d1-d0)/max(ok,1):.2f} ms per 200, client CPU {cc:.2f} s ({(d1-d0)/cc:.2f}x), load {open('/proc/loadavg').read().split()[0]}")
