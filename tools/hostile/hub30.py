#!/usr/bin/env python3
"""hub30.py DIR SECS HOG [VICTIM] [THREADS] (thirtieth pass): a hub (one grpcio channel, one HTTP/2 connection, on
--listen) carrying two identities' calls, as a gateway that forwards its users' calls with their tokens does:
HOG's GetIndexInfo padded to 48 KiB (/tmp/p28/gpok48.bin's message) from THREADS (default 8) threads, as fast as
answered, which passes its rates of body bytes and then its rate of such refusals (7f55651: the connection is
closed at the 8th refusal past it); VICTIM's (default bob) small Route every 50 ms on the same channel. SPLIT=1:
the victim on a channel of its own. Prints each identity's codes (the first message of each), the victim's
p50/p99, the daemon's CPU and the load."""
import os, sys, time, threading, grpc
d, secs, hog = sys.argv[1], float(sys.argv[2]), sys.argv[3]
vic = sys.argv[4] if len(sys.argv) > 4 else 'bob'; nth = int(sys.argv[5]) if len(sys.argv) > 5 else 8
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(d + '/tokens')}
def cpu(): f = open('/proc/%s/stat' % env['PID']).read().split(); return (int(f[13]) + int(f[14])) / 100
opts = [('grpc.ssl_target_name_override', '127.0.0.1')]
def chan(): return grpc.secure_channel(env['GRPC'], grpc.ssl_channel_credentials(open(env['CERT'], 'rb').read()), opts)
ch = chan(); vch = chan() if os.environ.get('SPLIT') == '1' else ch
big = open('/tmp/p28/gpok48.bin', 'rb').read()[5:]
q = b'open a pull request on github'; small = b'\x0a' + bytes([len(q)]) + q
info = ch.unary_unary('/classifier.v1.ClassifierService/GetIndexInfo')
route = vch.unary_unary('/classifier.v1.ClassifierService/Route')
codes = {hog: {}, vic: {}}; lock = threading.Lock(); lat = []
def one(f, req, who):
    s = time.time()
    try:
        f(req, metadata=[('authorization', 'Bearer ' + tok[who])], timeout=30); c = 'OK'
    except grpc.RpcError as e:
        c = e.code().name
        with lock:
            if c not in codes[who]: print(who, c, (e.details() or '')[:160], flush=True)
    with lock: codes[who][c] = codes[who].get(c, 0) + 1
    return time.time() - s
end = time.time() + secs; c0 = cpu()
def hogw():
    while time.time() < end: one(info, big, hog)
def vicw():
    while time.time() < end:
        lat.append(one(route, small, vic) * 1000); time.sleep(0.05)
ts = [threading.Thread(target=hogw) for _ in range(nth)] + [threading.Thread(target=vicw)]
[t.start() for t in ts]; [t.join() for t in ts]
lat.sort(); p = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))]
print('hub30 %s: hog %s %s; victim %s %s p50 %.1f p99 %.1f ms; daemon %.2f s CPU in %.0f s, load %s' % (
    'split' if vch is not ch else 'one channel', hog, codes[hog], vic, codes[vic], p(.5), p(.99), cpu() - c0, secs,
    open('/proc/loadavg').read().split()[0]))
