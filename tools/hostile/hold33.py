#!/usr/bin/env python3
"""hold33.py (thirty-third pass; hold32.py plus EAGER=1: the partial message's body, as much as the stream window
holds, is sent with the headers and the first message, before the daemon reads the first; GAP=s waits between
connections). hold32.py DIR WHO CONNS STREAMS SECS [KIB] [PATH] [MODE] (thirty-second pass): partial second messages. On each of
CONNS HTTP/2 connections (TLS when DIR/env has CERT=) open STREAMS calls of PATH (default the unary GetIndexInfo) with
WHO's token ('-': none); on each send a first message (empty), then a second message's 5-byte prefix declaring KIB
KiB (default 4095) and as much of its body as flow control lets through, never ending the stream, for SECS s; then
reset everything. MODE: 'second' (the default), 'first' (no first message: the only message is the partial one,
the case before 823e7ee), 'third' (two whole empty messages, then the partial third). Prints every 2 s the bytes
sent, the streams the daemon ended (RST_STREAM / trailers, by code / grpc-status) and the daemon's heap, RSS and
classifierd_grpc_recv_* metrics. FIRST=hex: the first message (envelope and all) in place of an empty one
(reflection's list_services: 00000000023a00); SHORT=n: hold back the last n bytes of the partial message."""
import os, sys, ssl, socket, time, select, urllib.request
import h2.connection, h2.config, h2.events, h2.exceptions
d, who, nc, ns, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
kib = int(sys.argv[6]) if len(sys.argv) > 6 else 4095
path = sys.argv[7] if len(sys.argv) > 7 else '/classifier.v1.ClassifierService/GetIndexInfo'
mode = sys.argv[8] if len(sys.argv) > 8 else 'second'
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
pid = env['PID']; host, port = env['GRPC'].split(':')
def stat():
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode().splitlines()
    g = lambda k: sum(float(l.split()[-1]) for l in m if l.startswith(k) and not l.startswith('#'))
    rss = int([l for l in open('/proc/%s/status' % pid) if l.startswith('VmRSS')][0].split()[1]) // 1024
    hwm = int([l for l in open('/proc/%s/status' % pid) if l.startswith('VmHWM')][0].split()[1]) // 1024
    return 'heap %d MB, RSS %d (HWM %d) MB, goroutines %d, load %s' % (g('go_memstats_heap_alloc_bytes') / 1048576, rss, hwm,
        g('go_goroutines'), open('/proc/loadavg').read().split()[0])
L = kib * 1024
first = bytes.fromhex(os.environ.get('FIRST', '0000000000'))  # FIRST: the first message's envelope, in hex
pre = {'second': first, 'first': b'', 'third': first + first}[mode] + b'\x00' + L.to_bytes(4, 'big')
junk = os.urandom(16384)
hdrs = [(':method', 'POST'), (':scheme', 'https' if 'CERT' in env else 'http'), (':path', path), (':authority', env['GRPC']),
        ('content-type', 'application/grpc'), ('te', 'trailers')]
if who != '-': hdrs.append(('authorization', 'Bearer ' + tok[who]))
class C:
    def __init__(s):
        raw = socket.create_connection((host, int(port)))
        if 'CERT' in env:
            cx = ssl.create_default_context(); cx.check_hostname = False; cx.verify_mode = ssl.CERT_NONE
            cx.set_alpn_protocols(['h2']); raw = cx.wrap_socket(raw, server_hostname=host)
        s.sock = raw; s.sock.setblocking(False)
        s.h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
        s.h.initiate_connection(); s.left = {}; s.dead = False
        s.h.increment_flow_control_window(1 << 30)
    def open(s, n):
        for _ in range(n):
            sid = s.h.get_next_available_stream_id()
            if os.environ.get('EAGER') == '1':  # wait for the connection's window: the whole burst at once
                t1 = time.time() + 2
                while s.h.outbound_flow_control_window < 65535 and time.time() < t1 and not s.dead:
                    s.flush(); select.select([s.sock], [], [], 0.02); s.rd()
            s.h.send_headers(sid, hdrs); s.left[sid] = L - int(os.environ.get('SHORT', '0'))  # SHORT: bytes of the body never sent
            if os.environ.get('EAGER') != '1': s.h.send_data(sid, pre)
            if os.environ.get('EAGER') == '1':  # the body with the first message, in the stream's window
                global sent
                s.h.send_data(sid, pre)
                while s.left[sid] > 0:
                    w = min(s.h.local_flow_control_window(sid), s.h.max_outbound_frame_size, s.left[sid], 16384)
                    if w <= 0: break
                    s.h.send_data(sid, junk[:w]); s.left[sid] -= w; sent += w
                s.flush()
    def pump(s):
        global sent
        for sid in list(s.left):
            try:
                while s.left.get(sid, 0) > 0:
                    w = min(s.h.local_flow_control_window(sid), s.h.max_outbound_frame_size, s.left[sid], 16384)
                    if w <= 0: break
                    s.h.send_data(sid, junk[:w]); s.left[sid] -= w; sent += w
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
                s.left.pop(sid, None)
        s.flush()
    def flush(s):
        out = s.h.data_to_send()
        while out and not s.dead:
            try: k = s.sock.send(out); out = out[k:]
            except (BlockingIOError, ssl.SSLWantWriteError): time.sleep(0.001)
            except OSError: s.dead = True
    def rd(s):
        try: data = s.sock.recv(1 << 20)
        except (BlockingIOError, ssl.SSLWantReadError): return
        except OSError: data = b''
        if not data: s.dead = True; ends['conn closed'] = ends.get('conn closed', 0) + 1; return
        try: evs = s.h.receive_data(data)
        except h2.exceptions.ProtocolError as e: s.dead = True; ends['proto ' + str(e)[:40]] = 1; return
        for e in evs:
            if isinstance(e, h2.events.StreamReset):
                k = 'RST %s' % e.error_code; ends[k] = ends.get(k, 0) + 1; s.left.pop(e.stream_id, None)
            elif isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                st = dict(e.headers).get('grpc-status')
                if st is not None:
                    k = 'grpc-status %s %s' % (st, dict(e.headers).get('grpc-message', '')[:70]); ends[k] = ends.get(k, 0) + 1
                    s.left.pop(e.stream_id, None)
            elif isinstance(e, h2.events.ConnectionTerminated):
                k = 'GOAWAY %s' % e.error_code; ends[k] = ends.get(k, 0) + 1; s.dead = True
sent = 0; ends = {}
print('before:', stat(), flush=True)
cs = []
for i in range(nc):
    try: c = C(); c.open(ns); c.flush(); cs.append(c); time.sleep(float(os.environ.get('GAP', '0')))
    except Exception as e: ends['connect ' + type(e).__name__] = ends.get('connect ' + type(e).__name__, 0) + 1
t0 = time.time(); nxt = t0 + 2
while time.time() - t0 < secs:
    live = [c for c in cs if not c.dead]
    r, _, _ = select.select([c.sock for c in live], [], [], 0.05) if live else ([], [], time.sleep(0.05))
    for c in live:
        if c.sock in r or (hasattr(c.sock, 'pending') and c.sock.pending()): c.rd()
        if not c.dead: c.pump()
    if time.time() >= nxt:
        nxt += 2; print('+%.0fs: sent %d MB, %d/%d connections live, streams sending %d; %s; ends %s' % (
            time.time() - t0, sent >> 20, len(live), nc, sum(len(c.left) for c in live), stat(), ends), flush=True)
for c in cs:
    try: c.h.close_connection(); c.flush(); c.sock.close()
    except Exception: pass
time.sleep(3)
print('end: sent %d MB; %s; ends %s' % (sent >> 20, stat(), ends), flush=True)
