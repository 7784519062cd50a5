#!/usr/bin/env python3
"""pipe16a.py DIR WHO CONNS SECS [BATCH] [QBYTES]: HTTP/1.1 pipelining over TLS (ALPN http/1.1) on
--http-listen: each of CONNS threads writes BATCH (default 64) small Routes (a QBYTES-byte query,
default 40, unique) as WHO at once, then reads the answers; counts statuses by their status lines."""
import os, sys, json, socket, ssl, time, threading, collections, re
d, who, conns, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
batch = int(sys.argv[5]) if len(sys.argv) > 5 else 64; qb = int(sys.argv[6]) if len(sys.argv) > 6 else 40
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['HTTP'].split(':'); codes = collections.Counter(); lk = threading.Lock()
def one():
    q = (os.urandom(8).hex() + ' open a pull request ') * (qb // 37 + 1)
    b = json.dumps({'query': q[:qb]}).encode()
    return (b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n'
            % (env['HTTP'].encode(), tok[who].encode(), len(b))) + b
def run():
    x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE; x.set_alpn_protocols(['http/1.1'])
    end = time.time() + secs
    while time.time() < end:
        try:
            s = x.wrap_socket(socket.create_connection((h, int(p)), timeout=30), server_hostname=h)
            while time.time() < end:
                s.sendall(b''.join(one() for _ in range(batch))); got = []; buf = b''
                while len(got) < batch:
                    c = s.recv(1 << 20)
                    if not c: raise OSError('closed')
                    buf += c; got = re.findall(rb'HTTP/1\.1 (\d{3})', buf)
                with lk:
                    for g in got: codes[int(g)] += 1
            s.close()
        except OSError as e:
            with lk: codes[type(e).__name__] += 1
ts = [threading.Thread(target=run) for _ in range(conns)]; [t.start() for t in ts]; [t.join() for t in ts]
print('pipe16a %s: %s' % (who, dict(codes)))
