# grpcio21.py DIR MODE N [KEEPALIVE_MS] (twenty-first pass): grpcio (C-core) as an honest client of the gRPC listener
# (TLS when DIR/env has CERT=, the self-signed certificate trusted), one channel:
#   many N : N small Route calls, 8 threads
#   idle N : one call a second for N seconds (keepalive pings every KEEPALIVE_MS, default 10000)
#   big N  : N GetIndexInfo calls one after another (a larger answer: BDP pings, WINDOW_UPDATEs)
# Routes are built by hand (field 1: query) so no generated stubs are needed. Prints codes and time.
import sys, time, threading, grpc
d, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ka = int(sys.argv[4]) if len(sys.argv) > 4 else 10000
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
who = __import__('os').environ.get('WHO', 'alice')
opts = [('grpc.keepalive_time_ms', ka), ('grpc.keepalive_permit_without_calls', 1), ('grpc.http2.max_pings_without_data', 0),
        ('grpc.ssl_target_name_override', '127.0.0.1')]
if 'CERT' in env:
    ch = grpc.secure_channel(env['GRPC'], grpc.ssl_channel_credentials(open(env['CERT'], 'rb').read()), opts)
else:
    ch = grpc.insecure_channel(env['GRPC'], opts)
q = b'open a pull request on github'
route = ch.unary_unary('/classifier.v1.ClassifierService/Route', request_serializer=None, response_deserializer=None)
info = ch.unary_unary('/classifier.v1.ClassifierService/GetIndexInfo', request_serializer=None, response_deserializer=None)
md = [('authorization', 'Bearer ' + tok[who])]
codes = {}; lock = threading.Lock()
def one(f, req):
    try:
        f(req, metadata=md, timeout=30); c = 'OK'
    except grpc.RpcError as e:
        c = e.code().name
        if c not in codes: print(mode, c, e.details()[:150])
    with lock: codes[c] = codes.get(c, 0) + 1
t0 = time.time()
if mode == 'many':
    it = iter(range(n))
    def w():
        for _ in it: one(route, b'\x0a' + bytes([len(q)]) + q)
    ts = [threading.Thread(target=w) for _ in range(8)]; [t.start() for t in ts]; [t.join() for t in ts]
elif mode == 'idle':
    for _ in range(n): one(route, b'\x0a' + bytes([len(q)]) + q); time.sleep(1)
elif mode == 'big':
    for _ in range(n): one(info, b'')
print('grpcio %s %d: %s in %.2f s' % (mode, n, codes, time.time() - t0))
