#!/usr/bin/env python3
"""mkreq19.py [OUT]: writes the nineteenth pass's raw requests for ks19 (default OUT /tmp/p19r;
@TOKEN@ and @HOST@ are filled by ks19): r403.txt / r403big.txt (CreateSession, 2 bytes / 65 KB:
carol's scope 403), r405.txt (a health Check POST with no token), route.txt (a small Route),
r401chunk256.txt / mcp401chunk256.txt (256 KiB in 1-byte chunks, no token, Route / /mcp),
rhistchunk.txt (64 KiB in 1-byte chunks with a token), mcpget.txt / mcpdel.txt (an unknown
MCP session)."""
import os, sys
out = sys.argv[1] if len(sys.argv) > 1 else '/tmp/p19r'; os.makedirs(out, exist_ok=True)
def w(name, data): open(os.path.join(out, name), 'wb').write(data)
def post(path, body, auth=True, ctype='application/json'):
    a = b'Authorization: Bearer @TOKEN@\r\n' if auth else b''
    return b'POST %s HTTP/1.1\r\nHost: @HOST@\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n\r\n' % (path, a, ctype.encode(), len(body)) + body
def chunked(path, body, auth):
    a = b'Authorization: Bearer @TOKEN@\r\n' if auth else b''
    ch = b''.join(b'1\r\n' + body[i:i + 1] + b'\r\n' for i in range(len(body))) + b'0\r\n\r\n'
    return b'POST %s HTTP/1.1\r\nHost: @HOST@\r\n%sContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' % (path, a) + ch
cs = b'/classifier.v1.ClassifierService/CreateSession'
w('r403.txt', post(cs, b'{}'))
w('r403big.txt', post(cs, b'{"session_id":"' + b'a' * 65000 + b'"}'))
w('r405.txt', post(b'/grpc.health.v1.Health/Check', b'{}', auth=False))
w('route.txt', post(b'/classifier.v1.ClassifierService/Route', b'{"query":"open a pull request on github"}'))
w('r401chunk256.txt', chunked(b'/classifier.v1.ClassifierService/Route', b' ' * (256 << 10), False))
w('mcp401chunk256.txt', chunked(b'/mcp', b' ' * (256 << 10), False))
w('rhistchunk.txt', chunked(b'/classifier.v1.ClassifierService/GetSessionHistory', b' ' * 65000 + b'{"session_id":"nosuch"}', True))
w('mcpget.txt', b'GET /mcp HTTP/1.1\r\nHost: @HOST@\r\nAuthorization: Bearer @TOKEN@\r\nAccept: text/event-stream\r\nMcp-Session-Id: NOSUCHSESSION\r\n\r\n')
w('mcpdel.txt', b'DELETE /mcp HTTP/1.1\r\nHost: @HOST@\r\nAuthorization: Bearer @TOKEN@\r\nMcp-Session-Id: NOSUCHSESSION\r\n\r\n')
