#!/usr/bin/env python3
"""hflood17a.py (idx17a.py; WHO - sends no token, METHOD default grpc.health.v1.Health/Check) DIR WHO CONNS SECS [BATCH] [METHOD] [GET]: a flood of cheap calls (default GetIndexInfo, {} body)
as WHO over --http-listen (HTTPS when DIR/env has CERT=, ALPN http/1.1), CONNS threads each on a kept-alive
connection writing BATCH requests at once (default 1: one at a time; more: pipelined), reconnecting when
closed; prints calls/s by status, connections closed by the daemon, this client's CPU seconds and the
daemon's in the window."""
import os, sys, time, socket, ssl, threading, collections, re, resource
d, who, conns, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
batch = int(sys.argv[5]) if len(sys.argv) > 5 else 1
method = sys.argv[6] if len(sys.argv) > 6 else 'grpc.health.v1.Health/Check'
verb = sys.argv[7] if len(sys.argv) > 7 else 'POST'  # GET: a bodiless GET of /METHOD (the explain page, GET /tools)
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['HTTP'].split(':'); pid = env['PID']
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
req = (b'POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: 2\r\n\r\n{}'
       % (method.encode(), env['HTTP'].encode(), b'' if who == '-' else b'Authorization: Bearer %s\r\n' % tok[who].encode()))
if verb == 'GET':
    req = (b'GET /%s HTTP/1.1\r\nHost: %s\r\n%s\r\n' % (method.encode(), env['HTTP'].encode(), b'' if who == '-' else b'Authorization: Bearer %s\r\n' % tok[who].encode()))
codes = collections.Counter(); lk = threading.Lock()
def dial():
    s = socket.create_connection((h, int(p)), timeout=30)
    if 'CERT' in env:
        x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE; x.set_alpn_protocols(['http/1.1'])
        s = x.wrap_socket(s, server_hostname=h)
    return s
def run(end):
    while time.time() < end:
        try:
            s = dial()
            buf = b''
            while time.time() < end:
                s.sendall(req * batch); got = 0
                while got < batch:
                    m = re.search(rb'HTTP/1\.1 (\d{3})[^\r]*\r\n(.*?)\r\n\r\n', buf, re.S)
                    if m:
                        n = int(re.search(rb'(?i)content-length: *(\d+)', m.group(2)).group(1)); e = m.end() + n
                        if len(buf) >= e:
                            with lk: codes[int(m.group(1))] += 1
                            got += 1; close = re.search(rb'(?i)connection: *close', m.group(2)); buf = buf[e:]
                            if close: raise OSError('closed by daemon')
                            continue
                    c = s.recv(1 << 16)
                    if not c: raise OSError('closed by daemon')
                    buf += c
        except OSError as e:
            with lk: codes['closed' if 'closed' in str(e) else type(e).__name__] += 1
        finally:
            try: s.close()
            except Exception: pass
c0, r0, t0 = cpu(), resource.getrusage(resource.RUSAGE_SELF), time.time()
ts = [threading.Thread(target=run, args=(t0 + secs,)) for _ in range(conns)]; [t.start() for t in ts]; [t.join() for t in ts]
r1, el = resource.getrusage(resource.RUSAGE_SELF), time.time() - t0
mine = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
ok = sum(v for k, v in codes.items() if k == 200)
print('hflood17a %s %s x%d batch %d: %s; %.0f answered/s; client %.1fs CPU, daemon %.1fs in %.0fs' % (
    who, method.split('/')[-1], conns, batch, dict(codes), ok / el, mine, cpu() - c0, el))
