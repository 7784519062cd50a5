#!/usr/bin/env python3
"""order26.py DIR PATH [TOKEN] [N] (twenty-sixth pass): the frames one HTTP/2 connection (TLS, ALPN h2) reads, in
wire order, after N (default 1) requests sent in one write: GET PATH (no body; with TOKEN as a Bearer token if
given and not '-'). Prints each frame (type, stream, flags, length; GOAWAY's last stream and code) until the
server closes the connection or 8 s pass, to show whether a refusal's DATA/END_STREAM comes before or after
the GOAWAY of a penalized peer's close (python-hyper h2, thus httpx, fails a stream whose frames follow a
GOAWAY). Uses hpack and hyperframe only (from httpx[http2])."""
import socket, ssl, sys, time
from hpack import Encoder
from hyperframe.frame import Frame, SettingsFrame, HeadersFrame, GoAwayFrame, WindowUpdateFrame
d, path = sys.argv[1], sys.argv[2]
tok = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != '-' else None
n = int(sys.argv[4]) if len(sys.argv) > 4 else 1
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
h, p = env['HTTP'].split(':')
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(['h2'])
s = ctx.wrap_socket(socket.create_connection((h, int(p))), server_hostname=h)
enc = Encoder(); out = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + SettingsFrame(0).serialize()
for i in range(n):
    hd = [(':method', 'GET'), (':scheme', 'https'), (':authority', env['HTTP']), (':path', path)]
    if tok: hd.append(('authorization', 'Bearer ' + tok))
    f = HeadersFrame(1 + 2 * i); f.data = enc.encode(hd); f.flags.add('END_HEADERS'); f.flags.add('END_STREAM')
    out += f.serialize()
s.sendall(out); buf = b''; t0 = time.time(); s.settimeout(8)
def fmt(f):
    x = f"{type(f).__name__[:-5]} s{f.stream_id} {sorted(f.flags)} len {f.body_len}"
    if isinstance(f, GoAwayFrame): x += f" last {f.last_stream_id} code {f.error_code}"
    return x
while True:
    try: b = s.recv(65536)
    except Exception as e: print(f"{time.time()-t0:.3f} recv: {e!r}"); break
    if not b: print(f"{time.time()-t0:.3f} EOF"); break
    buf += b
    while len(buf) >= 9:
        f, ln = Frame.parse_frame_header(buf[:9])
        if len(buf) < 9 + ln: break
        f.parse_body(memoryview(buf[9:9 + ln])); buf = buf[9 + ln:]
        if isinstance(f, SettingsFrame) and 'ACK' not in f.flags: s.sendall(SettingsFrame(0, flags=['ACK']).serialize())
        if not isinstance(f, (SettingsFrame, WindowUpdateFrame)): print(f"{time.time()-t0:.3f} {fmt(f)}")
