#!/usr/bin/env python3
"""mcpvictim21.py ADDR TOKENFILE WHO SECS [PID] (mcpvictim19.py, HTTPS with TLS=1 in the environment, certificate not verified): another identity's MCP ping every 50 ms on one
kept-alive HTTP/1.1 connection (a session opened first) at ADDR/mcp; prints calls, statuses,
p50/p99 in ms, and with PID that process's CPU in the window."""
import sys, json, time, http.client, os, ssl
addr, tf, who, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]); pid = sys.argv[5] if len(sys.argv) > 5 else None
tok = {l.split()[0]: l.split()[2] for l in open(tf)}
def cpu():
    if not pid: return 0
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
h, p = addr.split(':')
def mk():
    if os.environ.get('TLS') == '1':
        x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(h, int(p), timeout=30, context=x)
    return http.client.HTTPConnection(h, int(p), timeout=30)
c = mk()
H = {'Authorization': 'Bearer ' + tok[who], 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
def post(body, extra={}):
    global c
    try:
        c.request('POST', '/mcp', json.dumps(body), {**H, **extra}); r = c.getresponse(); r.read(); return r.status, r.getheader('Mcp-Session-Id')
    except Exception as e:
        c = mk(); return type(e).__name__, None
st, sid = post({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'v19', 'version': '1'}}})
S = {'Mcp-Session-Id': sid or '', 'Mcp-Protocol-Version': '2025-06-18'}
post({'jsonrpc': '2.0', 'method': 'notifications/initialized'}, S)
lat, codes = [], {}; c0 = cpu(); t0 = time.time(); i = 0
while time.time() - t0 < secs:
    s = time.time(); i += 1; st, _ = post({'jsonrpc': '2.0', 'id': 10 + i, 'method': 'ping'}, S)
    codes[st] = codes.get(st, 0) + 1; lat.append((time.time() - s) * 1000); time.sleep(0.05)
lat.sort()
print('mcpvictim %s: %d calls %s p50 %.1f p99 %.1f ms; server CPU %.1fs, load %s' % (who, len(lat), codes, lat[len(lat)//2], lat[int(len(lat)*.99)], cpu() - c0, open('/proc/loadavg').read().split()[0]))
