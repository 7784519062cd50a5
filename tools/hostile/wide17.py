#!/usr/bin/env python3
"""wide17.py DIR WHO T SECS: T threads POST a Route body of 60,000 members (about 769 KB) as WHO to
--http-listen (plaintext), each on a new connection (the refusal closes it); prints requests, statuses,
the daemon's CPU over the run and the client's."""
import os, sys, time, socket, threading, collections, resource
d, who, T, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['HTTP'].split(':')
body = ('{"query":"open a pull request",' + ','.join('"k%d":1' % i for i in range(60000)) + '}').encode()
req = (b'POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n'
       b'Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n' % (env['HTTP'].encode(), tok[who].encode(), len(body))) + body
codes = collections.Counter(); lk = threading.Lock()
def cpu():
    f = open('/proc/%s/stat' % env['PID']).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def run():
    end = time.time() + secs
    while time.time() < end:
        try:
            s = socket.create_connection((h, int(p)), timeout=10)
            try:
                s.sendall(req)
            except OSError:
                pass  # refused before the body was sent whole
            buf = b''
            while b'\r\n' not in buf:
                c = s.recv(4096)
                if not c: break
                buf += c
            s.close()
            with lk: codes[buf[9:12].decode() or 'none'] += 1
        except OSError as e:
            with lk: codes[type(e).__name__] += 1
c0, t0 = cpu(), time.time()
ts = [threading.Thread(target=run) for _ in range(T)]
[t.start() for t in ts]; [t.join() for t in ts]
ru = resource.getrusage(resource.RUSAGE_SELF)
print('%d requests of %d bytes in %.1f s: %s; daemon CPU %.2f s, client %.2f s' % (sum(codes.values()), len(body),
      time.time() - t0, dict(codes), cpu() - c0, ru.ru_utime + ru.ru_stime))
