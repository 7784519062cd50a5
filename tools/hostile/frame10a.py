#!/usr/bin/env python3
"""frame10a.py: ambiguous HTTP/1.1 framing and header tricks on
--http-listen, --mcp-listen and the proxy's --mcp-listen (DIR/env, DIR/tokens:
var/h10). Each case is a raw request; prints the status line the listener
answers (or what the socket did) and whether a second, pipelined request
(a smuggled Route without a token) was answered."""
import os, socket, sys, json
d = os.environ.get('DIR', os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../var/h10'))
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
A = tok['alice']
def raw(addr, data, wait=3.0):
    h, p = addr.split(':'); s = socket.create_connection((h, int(p)), timeout=wait)
    s.sendall(data); out = b''
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except socket.timeout:
        out += b'<timeout>'
    except ConnectionResetError:
        out += b'<reset>'
    s.close(); return out
FW = A[:-1] + (chr(0xFF10 + int(A[-1])) if A[-1].isdigit() else chr(0xFF41 + ord(A[-1]) - 97))
route = json.dumps({'query': 'open a pull request'}).encode()
smug = b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(route), route)
cases = {
 'CL+TE chunked': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n' % (A.encode(), len(route), route),
 'duplicate CL differing': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n%s' % (A.encode(), len(route), route),
 'CL with plus sign': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: +%d\r\n\r\n%s' % (A.encode(), len(route), route),
 'TE chunked, identity': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked, identity\r\n\r\n%x\r\n%s\r\n0\r\n\r\n' % (A.encode(), len(route), route),
 'chunk extension 1 MB': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1;%s\r\n{\r\n0\r\n\r\n' % (A.encode(), b'a' * (1 << 20)),
 'trailer 64 KB': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\nX-T: %s\r\n\r\n' % (A.encode(), len(route), route, b'a' * 65536),
 'trailer Authorization (no header token)': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTrailer: Authorization\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\nAuthorization: Bearer %s\r\n\r\n' % (len(route), route, A.encode()),
 'pipelined smuggle after 401 with body': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (len(smug), smug),
 'two Authorization, valid first': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nAuthorization: Bearer nope\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'two Authorization, valid second': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer nope\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'token with trailing space/tab': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s \t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'lowercase bearer': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'token uppercased': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.upper().encode(), len(route), route),
 'token fullwidth digit': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (FW.encode(), len(route), route),
 'token with NUL suffix': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\x00\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'obs-fold header': b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer\r\n %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'HTTP/1.0 no Host': b'POST /classifier.v1.ClassifierService/Route HTTP/1.0\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (A.encode(), len(route), route),
 'h2c upgrade': b'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
 'h2 prior knowledge': b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00',
}
for name, data in cases.items():
    out = raw(env['HTTP'], data)
    lines = [l for l in out.split(b'\r\n') if l.startswith(b'HTTP/')]
    print('%-42s %s %s' % (name, [l.decode('latin1') for l in lines][:3], '' if lines else repr(out[:60])))
