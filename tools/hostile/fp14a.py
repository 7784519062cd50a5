#!/usr/bin/env python3
"""fp14a.py DIR MODE RATE SECS: would a legitimate local client get the local peer penalized
(the early-reset rule: 256 early resets in 10 s, more than half of the peer's requests)?
MODE sse: m0's MCP client opens its GET /mcp event stream (a session of its own) and closes it
0.2 s later, RATE times a second (a client that reconnects its notification stream);
mode timeout: m0's Route over HTTP/1.1 with a 30 ms client timeout (a client with a short deadline
on a busy daemon: on a timeout it closes the connection), RATE a second; mode tlsfail: a TLS
client that refuses the daemon's self-signed certificate (curl without -k), RATE a second.
Prints what it did and the daemon's penalty counter before and after."""
import os, sys, json, time, socket, ssl, http.client, urllib.request, threading
d, mode, rate, secs = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
tlsctx = None
if 'CERT' in env:
    tlsctx = ssl.create_default_context(); tlsctx.check_hostname = False; tlsctx.verify_mode = ssl.CERT_NONE
def pen():
    for l in urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode().splitlines():
        if l.startswith('classifierd_grpc_reset_penalties_total'): return l.split()[1]
def conn(hp, timeout):
    h, p = hp.split(':')
    if tlsctx: return http.client.HTTPSConnection(h, int(p), timeout=timeout, context=tlsctx)
    return http.client.HTTPConnection(h, int(p), timeout=timeout)
H = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-06-18', 'Authorization': 'Bearer ' + tok['m0']}
sid = None
if mode == 'sse':
    c = conn(env['MCP'], 10)
    c.request('POST', '/mcp', json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fp14a", "version": "0"}}}), H)
    r = c.getresponse(); sid = r.getheader('Mcp-Session-Id'); r.read()
    c.request('POST', '/mcp', json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), dict(H, **{'Mcp-Session-Id': sid})); c.getresponse().read(); c.close()
p0 = pen(); t0 = time.time(); n = 0; res = {}
def note(k): res[k] = res.get(k, 0) + 1
def one():
    try:
        if mode == 'sse':
            c = conn(env['MCP'], 5); c.request('GET', '/mcp', headers=dict(H, **{'Mcp-Session-Id': sid, 'Accept': 'text/event-stream'}))
            r = c.getresponse(); note(r.status); time.sleep(0.2); c.close()
        elif mode == 'timeout':
            c = conn(env['HTTP'], 0.03); c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': 'open a pull request on github and ask for review'}), H)
            r = c.getresponse(); r.read(); note(r.status); c.close()
        elif mode == 'tlsfail':
            s = socket.create_connection(env['HTTP'].split(':')[0:1] + [int(env['HTTP'].split(':')[1])], timeout=5)
            try:
                ssl.create_default_context().wrap_socket(s, server_hostname='127.0.0.1')
            except ssl.SSLError as e:
                note('tls refused')
            s.close()
    except Exception as e:
        note(type(e).__name__)
ths = []
while time.time() - t0 < secs:
    th = threading.Thread(target=one); th.start(); ths.append(th); n += 1
    time.sleep(1 / rate)
for th in ths: th.join()
print('fp14a %s: %d in %.0f s, %s; penalties %s -> %s' % (mode, n, time.time() - t0, res, p0, pen()))
