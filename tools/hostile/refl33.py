#!/usr/bin/env python3
"""refl33.py DIR WHO N KIB [WAIT] (thirty-third pass): an honest grpcurl/grpcui-style client. One grpcio channel (TLS
when DIR/env has CERT=) opens a reflection stream (ServerReflectionInfo), asks list_services, reads the answer and
keeps the stream open, waiting for its next request (as a UI that browses services does); on the same channel it then
makes N Route calls of a KIB KiB query one after another (WAIT s apart, default 0), then asks list_services again on
the stream. Prints each Route's status code counts, the first error, when the first failure came (bytes sent so far),
and the stream's second answer. REFL=0: no reflection stream (the control). ROUTE_WHO=X: the Routes carry X's token (a
gateway's other user on the same connection)."""
import os, sys, time, queue, threading, grpc
d, who, n, kib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
wait = float(sys.argv[5]) if len(sys.argv) > 5 else 0
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
opts = [('grpc.ssl_target_name_override', '127.0.0.1'), ('grpc.max_send_message_length', 64 << 20)]
ch = (grpc.secure_channel(env['GRPC'], grpc.ssl_channel_credentials(open(env['CERT'], 'rb').read()), opts)
      if 'CERT' in env else grpc.insecure_channel(env['GRPC'], opts))
md = [('authorization', 'Bearer ' + tok[who])]
refl = os.environ.get('REFL', '1') == '1'
q = queue.Queue()
def reqs():
    while True:
        r = q.get()
        if r is None: return
        yield r
LIST = b'\x3a\x00'  # list_services
if refl:
    rs = ch.stream_stream('/grpc.reflection.v1.ServerReflection/ServerReflectionInfo', request_serializer=None, response_deserializer=None)
    it = rs(reqs(), metadata=md)
    q.put(LIST); a = next(it); print('reflection: first answer %d bytes' % len(a), flush=True)
route = ch.unary_unary('/classifier.v1.ClassifierService/Route', request_serializer=None, response_deserializer=None)
text = (b'open a pull request on github and ' * (kib * 1024 // 34 + 1))[:kib * 1024]
def ld(b):
    out = bytearray(); x = len(b)
    while x >= 0x80: out.append(x & 0x7f | 0x80); x >>= 7
    out.append(x); return bytes(out) + b
req = b'\x0a' + ld(text)
rmd = [('authorization', 'Bearer ' + tok[os.environ.get('ROUTE_WHO', who)])]
codes = {}; first = None; t0 = time.time()
for i in range(n):
    try:
        route(req, metadata=rmd, timeout=30); c = 'OK'
    except grpc.RpcError as e:
        c = e.code().name
        if first is None: first = (i, e.details()[:160]); print('first failure: call %d (%.1f MB sent before it): %s %s' % (i, i * len(req) / 1048576, c, first[1]), flush=True)
    codes[c] = codes.get(c, 0) + 1
    if wait: time.sleep(wait)
print('routes of %d KiB on the same channel: %s in %.1f s' % (kib, codes, time.time() - t0), flush=True)
if refl:
    try:
        q.put(LIST); a = next(it); print('reflection: second answer %d bytes' % len(a))
    except grpc.RpcError as e:
        print('reflection: stream ended %s %s' % (e.code().name, e.details()[:160]))
    q.put(None)
