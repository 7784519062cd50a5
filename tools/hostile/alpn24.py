#!/usr/bin/env python3
"""alpn24.py DIR (twenty-fourth pass): after de82632, what a TLS connection that negotiated ALPN X and then
sends Y gets from the HTTP listener. Cases: ALPN h2 / http/1.1 / none, then an HTTP/1.1 request with N header
fields (300 by default), or the preface's start then HTTP/1.1, or the request in 1-byte TLS records. Prints
each case's first answer line (or how the connection ended) and how long it took."""
import socket, ssl, sys, time, os
d = sys.argv[1]; N = int(sys.argv[2]) if len(sys.argv) > 2 else 300
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
host, port = env.get('TARGET', env['HTTP']).rsplit(':', 1); port = int(port)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}['m5']
def req(n):
    h = ''.join('X-F%d: v\r\n' % i for i in range(n))
    return ('GET /v1/index HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n%s\r\n' % (tok, h)).encode()
def run(name, alpn, chunks, bytewise=False):
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    if alpn: ctx.set_alpn_protocols(alpn)
    t = time.time(); s = socket.create_connection((host, port))
    try: s = ctx.wrap_socket(s)
    except ssl.SSLError as e: print('%-40s handshake refused: %s' % (name, e.reason)); return
    s.settimeout(5)
    neg = s.selected_alpn_protocol(); out = b''
    try:
        for c in chunks:
            if bytewise:
                for i in range(len(c)): s.send(c[i:i+1])
            else: s.sendall(c)
            time.sleep(0.05)
        while len(out) < 200:
            b = s.recv(4096)
            if not b: out += b'<EOF>'; break
            out += b
    except Exception as e: out += ('<%s>' % type(e).__name__).encode()
    first = out.split(b'\r\n')[0][:80] if not out.startswith(b'\x00') else out[:24].hex()
    print('%-40s alpn=%-9s -> %r (%.2fs)' % (name, neg, first, time.time() - t))
pre = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
run('h2 + HTTP/1.1 %d fields' % N, ['h2'], [req(N)])
run('h2 + HTTP/1.1 3 fields', ['h2'], [req(3)])
run('h2 + preface start + HTTP/1.1', ['h2'], [pre[:16], req(N)])
run('h2 + "PRI * HTTP/2.0" h1 request', ['h2'], [b'PRI * HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n' + req(3)])
run('h2 + HTTP/1.1 bytewise', ['h2'], [req(3)], bytewise=True)
run('h2 + preface bytewise + SETTINGS', ['h2'], [pre + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00'], bytewise=True)
run('h2 + nothing', ['h2'], [])
run('http/1.1 + HTTP/1.1 %d fields' % N, ['http/1.1'], [req(N)])
run('none + HTTP/1.1 %d fields' % N, None, [req(N)])
run('none + HTTP/1.1 3 fields', None, [req(3)])
run('http/1.1 + preface + SETTINGS', ['http/1.1'], [pre + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00'])
run('none + preface + SETTINGS', None, [pre + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00'])
run('h2,http/1.1 offered + HTTP/1.1', ['h2', 'http/1.1'], [req(3)])
run('foo/1 offered + HTTP/1.1 3 fields', ['foo/1'], [req(3)])
