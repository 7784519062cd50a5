#!/usr/bin/env python3
"""streams34.py DIR WHO MODE [N] [KIB] [SECS] (thirty-fourth pass): 26a147a's per-stream count of a reflection stream
(rapidreset.Streams.Received less InPayload), on one HTTP/2 connection (TLS when DIR/env has CERT=). Each of N
(default 64) reflection streams sends list_services, then a second request's prefix declaring KIB (default 63) KiB and
all of it but its last byte. MODE: 'burst' (all N streams' HEADERS, first and partial second messages in one write),
'overflow' (N past the daemon's 64 concurrent streams: the rest refused by the transport, their frames in the same
burst), 'cont' (each HEADERS block, with a PADHDR (3,000) byte header, sent as HEADERS + CONTINUATION frames of 1,000 bytes), 'pad' (the partial seconds
in DATA frames padded by 255 bytes), 'padok' (no partial: a complete padded list_services every 2 s, the stream kept
open: padding counted as received and never handed on?), 'end' (the partial then END_STREAM), 'rst' (the partial then
RST_STREAM CANCEL), 'honest' (grpcurl-style: list, describe each service with 2 s pauses, for SECS). Prints the bytes
sent, classifierd_request_bytes_in_flight and the streams' ends after 1 s and every 3 s for SECS (default 12) s, and
after closing."""
import os, sys, ssl, socket, time, urllib.request
import h2.connection, h2.config, h2.events, h2.errors, h2.exceptions
d, who, mode = sys.argv[1], sys.argv[2], sys.argv[3]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 64; KIB = int(sys.argv[5]) if len(sys.argv) > 5 else 63
SECS = float(sys.argv[6]) if len(sys.argv) > 6 else 12
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
host, port = env['GRPC'].split(':')
def stat():
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode().splitlines()
    g = lambda k: sum(float(l.split()[-1]) for l in m if l.startswith(k) and not l.startswith('#'))
    return 'in flight %d B, goroutines %d, heap %.1f MB, load %s' % (g('classifierd_request_bytes_in_flight'), g('go_goroutines'),
        g('go_memstats_heap_alloc_bytes ') / 1048576, open('/proc/loadavg').read().split()[0])
hdrs = [(':method', 'POST'), (':scheme', 'https' if 'CERT' in env else 'http'), (':path', '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo'),
        (':authority', env['GRPC']), ('content-type', 'application/grpc'), ('te', 'trailers'), ('authorization', 'Bearer ' + tok[who])]
if mode == 'overflow': h2.connection.H2Connection.open_outbound_streams = property(lambda self: 0)  # past the server's 64
if mode == 'cont': hdrs.append(('x-pad', 'a' * int(os.environ.get('PADHDR', '3000'))))
LIST = bytes.fromhex('00000000023a00')
def msg(field, s): b = bytes([field]) + bytes([len(s)]) + s; return b'\x00' + len(b).to_bytes(4, 'big') + b
raw = socket.create_connection((host, int(port)))
if 'CERT' in env:
    cx = ssl.create_default_context(); cx.check_hostname = False; cx.verify_mode = ssl.CERT_NONE
    cx.set_alpn_protocols(['h2']); raw = cx.wrap_socket(raw, server_hostname=host)
h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
h.local_settings.max_header_list_size = 1 << 20
h.initiate_connection(); h.increment_flow_control_window(1 << 30); raw.sendall(h.data_to_send())
raw.settimeout(0.05); ends = {}; answers = {}; sent = 0; dead = False
def rd():
    global dead
    while True:
        try: data = raw.recv(1 << 20)
        except (socket.timeout, ssl.SSLWantReadError, BlockingIOError): return
        except OSError: data = b''
        if not data: dead = True; ends['conn closed'] = 1; return
        try: evs = h.receive_data(data)
        except h2.exceptions.ProtocolError: dead = True; ends['proto'] = 1; return
        for e in evs:
            if isinstance(e, h2.events.StreamReset): k = 'RST %s' % e.error_code; ends[k] = ends.get(k, 0) + 1
            elif isinstance(e, h2.events.DataReceived):
                answers[e.stream_id] = answers.get(e.stream_id, 0) + len(e.data); h.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                st = dict(e.headers).get('grpc-status')
                if st is not None: k = 'grpc-status %s %s' % (st, dict(e.headers).get('grpc-message', '')[:50]); ends[k] = ends.get(k, 0) + 1
            elif isinstance(e, h2.events.ConnectionTerminated): ends['GOAWAY %s' % e.error_code] = 1; dead = True
        out = h.data_to_send()
        if out: raw.sendall(out)
t1 = time.time() + 2
while not h.remote_settings_acked if False else time.time() < t1 and h.remote_settings.max_concurrent_streams > 1000: rd()
rd()
if mode == 'cont': h.max_outbound_frame_size = 1000  # HEADERS + CONTINUATION frames of 1,000 bytes
L = KIB * 1024; pad = 255 if mode == 'pad' else None
sids = []
if mode == 'honest':
    sid = h.get_next_available_stream_id(); h.send_headers(sid, hdrs); h.send_data(sid, LIST); raw.sendall(h.data_to_send()); sids = [sid]
else:
    for i in range(N):
        sid = h.get_next_available_stream_id(); sids.append(sid)
        h.send_headers(sid, hdrs if mode != 'cont' else hdrs[:-1] + [('x-pad', os.urandom(1500).hex()[:int(os.environ.get('PADHDR', '3000'))])])  # a new value each stream: no HPACK index
        if mode == 'padok':
            h.send_data(sid, LIST, pad_length=255); sent += len(LIST) + 256; continue
        body = LIST + b'\x00' + L.to_bytes(4, 'big')
        h.send_data(sid, body, pad_length=pad); sent += len(body) + (256 if pad else 0)
    raw.sendall(h.data_to_send())  # every stream's HEADERS, first message and prefix in one write
    left = {sid: (0 if mode == 'padok' else L - 1) for sid in sids}; t1 = time.time() + 4
    while any(left.values()) and time.time() < t1 and not dead:
        moved = False
        for sid in sids:
            if left[sid] <= 0: continue
            try: w = min(h.local_flow_control_window(sid) - (256 if pad else 0), h.max_outbound_frame_size - (256 if pad else 0), left[sid])
            except h2.exceptions.StreamClosedError: left[sid] = 0; continue
            if w <= 0: continue
            try: h.send_data(sid, os.urandom(w), pad_length=pad)
            except h2.exceptions.StreamClosedError: left[sid] = 0; continue
            sent += w + (256 if pad else 0); left[sid] -= w; moved = True
        raw.sendall(h.data_to_send())
        if not moved: rd(); time.sleep(0.01)
    for sid in sids:
        try:
            if mode == 'end': h.end_stream(sid)
            if mode == 'rst': h.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        except h2.exceptions.StreamClosedError: pass
    try: raw.sendall(h.data_to_send())
    except OSError: dead = True
t0 = time.time(); nxt = t0 + 1; k = 0
while time.time() - t0 < SECS and not dead:
    rd()
    if mode == 'padok' and not os.environ.get('IDLE') and time.time() - t0 > 2 * (k + 1):  # IDLE=1: the first padded request only
        k += 1
        for sid in sids:
            try: h.send_data(sid, LIST, pad_length=255); sent += len(LIST) + 256
            except h2.exceptions.StreamClosedError: pass
        raw.sendall(h.data_to_send())
    if mode == 'honest' and time.time() - t0 > 2 * (k + 1) and k < 8:
        k += 1
        h.send_data(sids[0], msg(0x22, b'grpc.health.v1.Health' if k % 2 else b'classifier.v1.ClassifierService')); raw.sendall(h.data_to_send())
    if time.time() >= nxt:
        nxt += 3; print('+%.0fs: sent %d B, %d streams answered (%d B); %s; ends %s' % (time.time() - t0, sent, len(answers), sum(answers.values()), stat(), ends), flush=True)
raw.close(); time.sleep(1.5)
print('after close: sent %d B; %s; ends %s' % (sent, stat(), ends), flush=True)
