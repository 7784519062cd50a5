#!/usr/bin/env python3
"""env11a.py: enveloped bodies on --http-listen (gRPC-Web, Connect streaming) with odd flags
(compressed without an encoding header, trailer, end-stream), two messages for a unary call,
an empty envelope and a gzip bomb behind the compressed flag; prints status, grpc-status and RSS (DIR/env)."""
import os, sys, struct, gzip, http.client
d = os.environ.get('DIR', 'var/h11')
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
rss = lambda: int([l for l in open('/proc/%s/status' % env['PID']) if l.startswith('VmRSS')][0].split()[1]) // 1024
msg = b'\x0a\x05hello'  # RouteRequest{query:"hello"}
bomb = gzip.compress(b'\x0a' + b'\x00' * (50 << 20))
def env_(flag, p): return struct.pack('>BI', flag, len(p)) + p
cases = {'plain': env_(0, msg), 'flag1 gzip no header': env_(1, gzip.compress(msg)), 'flag1 bomb no header': env_(1, bomb),
         'flag 0x80': env_(0x80, msg), 'flag 0x02': env_(2, msg), 'two messages': env_(0, msg) + env_(0, msg), 'empty envelope': env_(0, b''),
         'flag 0xff': env_(0xff, msg)}
for ct in ['application/grpc-web+proto', 'application/connect+proto']:
    for name, body in cases.items():
        h, p = env['HTTP'].split(':'); c = http.client.HTTPConnection(h, int(p), timeout=30)
        c.request('POST', '/classifier.v1.ClassifierService/Route', body, {'Content-Type': ct, 'Authorization': 'Bearer ' + tok['alice']})
        r = c.getresponse(); b = r.read()
        print('%-28s %-22s %d grpc-status=%s %r RSS %d' % (ct, name, r.status, r.getheader('grpc-status'), b[-120:], rss()))
