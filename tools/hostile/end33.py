#!/usr/bin/env python3
"""end33.py DIR WHO RUNS CONNS STREAMS (thirty-third pass): streams that end while their call waits in RecvMsg for a
next message. Each run opens CONNS connections (TLS when DIR/env has CERT=) of STREAMS reflection streams; each sends
list_services, reads its answer, sends 1,000 bytes of a second request declaring 64 KiB, then ends in one of three
ways by stream number: END_STREAM mid-message (half close), RST_STREAM CANCEL, or nothing (the connection is closed
under it). Then one more connection holds one honest idle stream while the others end. After each run (and 2 s),
prints classifierd_request_bytes_in_flight (should be 0), goroutines and heap: the receiving list or held bytes
leaking would show as in-flight bytes or goroutines that never come back."""
import os, sys, ssl, socket, time, select, urllib.request
import h2.connection, h2.config, h2.events, h2.errors
d, who, runs, nc, ns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
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
def conn():
    raw = socket.create_connection((host, int(port)))
    if 'CERT' in env:
        cx = ssl.create_default_context(); cx.check_hostname = False; cx.verify_mode = ssl.CERT_NONE
        cx.set_alpn_protocols(['h2']); raw = cx.wrap_socket(raw, server_hostname=host)
    h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
    h.initiate_connection(); raw.sendall(h.data_to_send()); return raw, h
def pump(raw, h, until, secs=3):
    t = time.time() + secs; got = set()
    while time.time() < t and not until(got):
        r, _, _ = select.select([raw], [], [], 0.05)
        if raw in r or (hasattr(raw, 'pending') and raw.pending()):
            try: data = raw.recv(1 << 16)
            except (ssl.SSLWantReadError, BlockingIOError): continue
            if not data: return got
            for e in h.receive_data(data):
                if isinstance(e, h2.events.DataReceived):
                    got.add(e.stream_id); h.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        out = h.data_to_send()
        if out: raw.sendall(out)
    return got
print('before:', stat(), flush=True)
keep = conn(); sid = keep[1].get_next_available_stream_id(); keep[1].send_headers(sid, hdrs); keep[1].send_data(sid, bytes.fromhex('00000000023a00'))
keep[0].sendall(keep[1].data_to_send()); print('honest idle stream answered:', sid in pump(*keep, lambda g: sid in g), flush=True)
for r in range(runs):
    cs = []
    for _ in range(nc):
        raw, h = conn(); sids = []
        for _ in range(ns):
            s = h.get_next_available_stream_id(); h.send_headers(s, hdrs); h.send_data(s, bytes.fromhex('00000000023a00')); sids.append(s)
        raw.sendall(h.data_to_send()); pump(raw, h, lambda g: len(g) >= len(sids))
        for i, s in enumerate(sids):
            h.send_data(s, b'\x00' + (65536).to_bytes(4, 'big') + os.urandom(1000))
        raw.sendall(h.data_to_send()); time.sleep(0.05)
        for i, s in enumerate(sids):
            if i % 3 == 0: h.end_stream(s)
            elif i % 3 == 1: h.reset_stream(s, h2.errors.ErrorCodes.CANCEL)
        raw.sendall(h.data_to_send()); pump(raw, h, lambda g: False, 0.2); cs.append(raw)
    for raw in cs: raw.close()
    time.sleep(2); print('run %d: %s' % (r + 1, stat()), flush=True)
keep[1].send_data(sid, bytes.fromhex('00000000023a00')); keep[0].sendall(keep[1].data_to_send())
print('honest idle stream answered again:', sid in pump(*keep, lambda g: sid in g), flush=True)
