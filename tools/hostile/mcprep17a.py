#!/usr/bin/env python3
"""mcprep17a.py DIR WHO CONNS SECS SIZE [TOOL]: CONNS threads, each with its own MCP session on a kept-alive
--mcp-listen connection (HTTPS when DIR/env has CERT=, ALPN http/1.1), calling as fast as answered the tool
TOOL (default report_use: a SIZE-byte query of fresh words, servers [github]; route: the same query) as WHO
for SECS s. report_use is not among the MCP tools the daemon admits (internal/ops MCPAdmit), yet by query
it embeds and scores its text (a Route of it) before the identity's --learn-report-rate is checked. An initialize
refused, or a session gone (404), is tried again. Prints
answers by outcome (ok, tool error text), calls/s, this client's CPU and the daemon's in the window."""
import os, sys, json, time, http.client, ssl, threading, collections, resource, random, itertools
d, who, conns, secs, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
tool = sys.argv[6] if len(sys.argv) > 6 else 'report_use'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']; h, p = env['MCP'].split(':')
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def conn():
    if 'CERT' in env:
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE; c.set_alpn_protocols(['http/1.1'])
        return http.client.HTTPSConnection(h, int(p), timeout=120, context=c)
    return http.client.HTTPConnection(h, int(p), timeout=120)
codes = collections.Counter(); first = {}; lk = threading.Lock()
def post(c, hd, msg):
    c.request('POST', '/mcp', json.dumps(msg), hd); r = c.getresponse(); b = r.read()
    return r.status, b, r.getheader('Mcp-Session-Id'), (r.getheader('Connection') or '').lower() == 'close'
def session(c):
    hd = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'Authorization': 'Bearer ' + tok[who]}
    for _ in range(50):  # an initialize refused (-32029 while WHO's other sessions are busy) leaves no session: again
        st, b, sid, _ = post(c, hd, {'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'r17', 'version': '0'}}})
        if st == 200 and sid and b'"error"' not in b[:400]:
            break
        with lk: codes['initialize refused'] += 1
        time.sleep(0.3)
    hd['Mcp-Session-Id'] = sid; hd['MCP-Protocol-Version'] = '2025-06-18'
    post(c, hd, {'jsonrpc': '2.0', 'method': 'notifications/initialized'})
    return hd
def query():
    w = '%08x' % random.getrandbits(32)
    return ((w + ' create a github issue about ') * (size // 36 + 1))[:size]
def run(end):
    c = conn(); hd = session(c); ids = itertools.count(1)
    while time.time() < end:
        args = {'query': query()}
        if tool == 'report_use': args['servers'] = ['github']
        try:
            st, b, _, close = post(c, hd, {'jsonrpc': '2.0', 'id': next(ids), 'method': 'tools/call', 'params': {'name': tool, 'arguments': args}})
            t = b.decode(errors='replace')
            k = st if st != 200 else ('tool-error' if '"isError":true' in t else ('rpc-error' if '"error"' in t[:400] else 'ok'))
            with lk:
                codes[k] += 1
                if k not in first: first[k] = t[:220]
            if close: c.close(); c = conn()
            if st == 404: hd = session(c)  # the session is gone (its initialize failed): a new one
        except Exception as e:
            with lk: codes[type(e).__name__] += 1
            c.close(); c = conn(); hd = session(c)
c0, r0, t0 = cpu(), resource.getrusage(resource.RUSAGE_SELF), time.time()
ts = [threading.Thread(target=run, args=(t0 + secs,)) for _ in range(conns)]; [t.start() for t in ts]; [t.join() for t in ts]
r1, el = resource.getrusage(resource.RUSAGE_SELF), time.time() - t0
n = sum(codes.values())
print('mcprep17a %s %s x%d %d bytes: %s (%.1f/s); first %s; client %.1fs CPU, daemon %.1fs in %.0fs (%.1f ms a call)' % (
    who, tool, conns, size, dict(codes), n / el, first, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, cpu() - c0, el,
    1000 * (cpu() - c0) / max(n, 1)))
