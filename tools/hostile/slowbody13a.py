#!/usr/bin/env python3
"""slowbody13a.py: how long one request whose body trickles is held, with a valid token, on
--http-listen, --mcp-listen and the proxy's listener (DIR/env): per listener, four connections:
'trickle' (Content-Length 100000, one byte every GAP s), 'chunked' (one 1-byte chunk every GAP s),
'expect' (Expect: 100-continue, the body never sent) and 'idle' (Content-Length 10, no body byte),
for at most SECS s; prints when each connection got its answer (status line) or was closed.
usage: slowbody13a.py DIR SECS GAP"""
import os, sys, time, socket, threading
d, secs, gap = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
targets = [('http', env['HTTP'], '/classifier.v1.ClassifierService/Route', 'carol'), ('mcp', env['MCP'], '/mcp', 'carol')]
if 'PROXY' in env: targets.append(('proxy', env['PROXY'], '/mcp', 'caller'))
out = []
def one(name, addr, path, who, kind):
    h, p = addr.split(':'); s = socket.create_connection((h, int(p))); t0 = time.time()
    head = b'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' % (path.encode(), tok[who].encode())
    head += {'trickle': b'Content-Length: 100000\r\n', 'chunked': b'Transfer-Encoding: chunked\r\n', 'expect': b'Content-Length: 1000\r\nExpect: 100-continue\r\n', 'idle': b'Content-Length: 10\r\n'}[kind]
    s.sendall(head + b'\r\n'); s.settimeout(gap); got = b''; sent = 0
    while time.time() - t0 < secs:
        try:
            b = s.recv(200)
            if not b: got = got or b'(closed)'; break
            got += b
            if not got.startswith(b'HTTP/1.1 100'): break
            got = got.split(b'\r\n\r\n', 1)[1] if b'\r\n\r\n' in got else got
        except socket.timeout:
            pass
        except Exception as e:
            got = repr(e).encode(); break
        try:
            if kind == 'trickle': s.sendall(b' '); sent += 1
            elif kind == 'chunked': s.sendall(b'1\r\n \r\n'); sent += 1
        except Exception as e:
            got = got or repr(e).encode(); break
    out.append('%-6s %-8s %5.1fs sent %4d bytes: %r' % (name, kind, time.time() - t0, sent, (got.split(b'\r\n')[0] or b'(held to the end)')[:70]))
ths = [threading.Thread(target=one, args=(n, a, p, w, k)) for n, a, p, w in targets for k in ('trickle', 'chunked', 'expect', 'idle')]
[t.start() for t in ths]; [t.join() for t in ths]
print('\n'.join(sorted(out)))
