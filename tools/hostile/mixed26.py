#!/usr/bin/env python3
"""mixed26.py DIR [WHO] (twenty-sixth pass): one HTTP/2 connection (TLS) as a browser might use it while its
peer is penalized: a POST Route with WHO's token (default bob) whose JSON body is sent in two halves, and
between them a GET /favicon.ico with no token (404, a refusal that did not pass authentication: 9f470d2
closes the connection at it by GOAWAY and its reader reads nothing more for up to 5 s); with a third
argument `403`, a POST CreateSession with WHO's token instead (403 for a token without `sessions`: carol);
with `watch SESSION`, stream 1 is instead a gRPC-Web JSON WatchExposure of SESSION (made beforehand with
CreateSession): a long-lived answer, and the favicon comes at +1 s. Prints the frames read
in wire order with their times: does the Route, whose head came before the GOAWAY, get its answer?"""
import socket, ssl, sys, time, json
from hpack import Encoder
from hyperframe.frame import Frame, SettingsFrame, HeadersFrame, DataFrame, GoAwayFrame, WindowUpdateFrame
d = sys.argv[1]; who = sys.argv[2] if len(sys.argv) > 2 else 'bob'
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = [l.split()[2] for l in open(d + '/tokens') if l.split()[0] == who][0]
h, p = env['HTTP'].split(':')
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(['h2'])
s = ctx.wrap_socket(socket.create_connection((h, int(p))), server_hostname=h)
enc = Encoder(); t0 = time.time()
def hd(sid, method, path, extra, end):
    f = HeadersFrame(sid); f.data = enc.encode([(':method', method), (':scheme', 'https'), (':authority', env['HTTP']), (':path', path)] + extra)
    f.flags.add('END_HEADERS')
    if end: f.flags.add('END_STREAM')
    return f.serialize()
body = json.dumps({"query": "list the files in this repository " * 20}).encode(); half = len(body) // 2
out = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + SettingsFrame(0).serialize()
if len(sys.argv) > 4 and sys.argv[3] == 'watch':
    m = json.dumps({"sessionId": sys.argv[4]}).encode(); f = DataFrame(1, data=b'\0' + len(m).to_bytes(4, 'big') + m); f.flags.add('END_STREAM')
    s.sendall(out + hd(1, 'POST', '/classifier.v1.ClassifierService/WatchExposure', [('authorization', 'Bearer ' + tok), ('content-type', 'application/grpc-web+json')], False) + f.serialize())
    time.sleep(1); s.sendall(hd(3, 'GET', '/favicon.ico', [], True))
    print(f"{time.time()-t0:.3f} sent: WatchExposure, the favicon at 1 s")
else:
  out += hd(1, 'POST', '/classifier.v1.ClassifierService/Route', [('authorization', 'Bearer ' + tok), ('content-type', 'application/json')], False)
  out += DataFrame(1, data=body[:half]).serialize()
  s.sendall(out); time.sleep(0.2)
  if len(sys.argv) > 3 and sys.argv[3] == '403':
      f = DataFrame(3, data=b'{}'); f.flags.add('END_STREAM')
      s.sendall(hd(3, 'POST', '/classifier.v1.ClassifierService/CreateSession', [('authorization', 'Bearer ' + tok), ('content-type', 'application/json')], False) + f.serialize())
  else:
      s.sendall(hd(3, 'GET', '/favicon.ico', [], True))
  time.sleep(0.3)
  f = DataFrame(1, data=body[half:]); f.flags.add('END_STREAM'); s.sendall(f.serialize())
  print(f"{time.time()-t0:.3f} sent: Route head + half body, the other request at 0.2 s, rest of the body at 0.5 s")
buf = b''; s.settimeout(10)
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
        if isinstance(f, (SettingsFrame, WindowUpdateFrame)): continue
        x = f"{type(f).__name__[:-5]} s{f.stream_id} {sorted(f.flags)} len {f.body_len}"
        if isinstance(f, GoAwayFrame): x += f" last {f.last_stream_id} code {f.error_code}"
        if isinstance(f, DataFrame) and f.stream_id == 1 and f.body_len: x += " " + bytes(f.data[:60]).decode(errors='replace')
        print(f"{time.time()-t0:.3f} {x}")
