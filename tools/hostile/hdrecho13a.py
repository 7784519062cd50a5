#!/usr/bin/env python3
"""hdrecho13a.py: header values a listener may quote back: Origin (no token), Authorization, Mcp-Session-Id,
Mcp-Protocol-Version, Content-Encoding, Connect-Timeout-Ms and Grpc-Timeout of 60 KB (quotes and backslashes,
which %q doubles) on --http-listen, --mcp-listen and the proxy (var/h13a/env); prints each status and answer size."""
import socket, os
env = dict(l.strip().split('=', 1) for l in open('/work/wt/hostile13a/var/h13a/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open('/work/wt/hostile13a/var/h13a/tokens')}
V = b'"\\' * 30000
def go(name, port, path, hdrs, who=None):
    s = socket.create_connection(('127.0.0.1', port)); s.settimeout(10)
    a = b'Authorization: Bearer %s\r\n' % tok[who].encode() if who else b''
    s.sendall(b'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: 2\r\n\r\n{}' % (path, a, hdrs))
    got = b''
    try:
        while True:
            b = s.recv(1 << 16)
            if not b: break
            got += b
            if len(got) > 2_000_000: break
    except Exception: pass
    print('%-40s %6d sent-header, answer %7d bytes: %r' % (name, len(hdrs), len(got), got.split(b'\r\n')[0]))
for port, path, who in [(42101, b'/classifier.v1.ClassifierService/Route', 'carol'), (42102, b'/mcp', 'carol'), (42120, b'/mcp', 'caller')]:
    go('%d Origin, no token' % port, port, path, b'Origin: http://' + V + b'\r\n')
    go('%d Content-Type junk, token' % port, port, path, b'X: y\r\n', who)
    go('%d Authorization junk' % port, port, path, b'Authorization: Bearer ' + V + b'\r\n')
    go('%d Mcp-Session-Id junk, token' % port, port, path, b'Mcp-Session-Id: ' + V + b'\r\n', who)
    go('%d Mcp-Protocol-Version junk, token' % port, port, path, b'Mcp-Protocol-Version: ' + V + b'\r\n', who)
    go('%d Content-Encoding junk, token' % port, port, path, b'Content-Encoding: ' + V + b'\r\n', who)
    go('%d Connect-Timeout-Ms junk, token' % port, port, path, b'Connect-Timeout-Ms: ' + V + b'\r\nConnect-Protocol-Version: 1\r\n', who)
    go('%d Grpc-Timeout junk, token' % port, port, path, b'Grpc-Timeout: ' + V + b'\r\n', who)
