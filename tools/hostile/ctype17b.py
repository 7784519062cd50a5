#!/usr/bin/env python3
"""ctype17b.py DIR WHO CTYPE SHAPE T SECS: T threads POST to the proxy's /mcp (env ADDR, SPID for
another MCP listener) as WHO (a session open) a body of SHAPE with Content-Type CTYPE, each on a new
connection: SHAPE "wide" (a tools/call whose arguments hold 60,000 keys, 769 KB: refused for its
members), "str" (a tools/call of one 3.9 MB string: no bound broken), "env" (SHAPE wide framed as
one +json envelope). Prints requests, statuses, the server's CPU over the run and the client's."""
import os, sys, time, socket, threading, collections, resource, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, who, ctype, shape, T, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
addr = os.environ.get('ADDR', env.get('PROXY', '')); pid = os.environ.get('SPID', env.get('PROXY_PID'))
h, p = addr.split(':')
s = mcp10.Session(addr, tok[who])
if shape == 'str':
    args = {'q': 'a' * (3900 << 10)}
else:
    args = {'k%d' % i: 1 for i in range(60000)}
body = json.dumps({'jsonrpc': '2.0', 'id': 7, 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': 'everything', 'tool': 'echo', 'arguments': args}}}).encode()
if shape == 'env':
    body = b'\x00' + len(body).to_bytes(4, 'big') + body
hdr = dict(s.h); hdr['Content-Type'] = ctype
req = ('POST /mcp HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n' % (addr, ''.join('%s: %s\r\n' % kv for kv in hdr.items()), len(body))).encode() + body
codes = collections.Counter(); lk = threading.Lock()
def cpu():
    f = open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def run():
    end = time.time() + secs
    while time.time() < end:
        try:
            c = socket.create_connection((h, int(p)), timeout=30)
            try: c.sendall(req)
            except OSError: pass
            buf = b''
            while b'\r\n\r\n' not in buf:
                x = c.recv(65536)
                if not x: break
                buf += x
            c.close()
            with lk: codes[buf[9:12].decode() or 'none'] += 1
        except OSError as e:
            with lk: codes[type(e).__name__] += 1
c0, t0 = cpu(), time.time()
ts = [threading.Thread(target=run) for _ in range(T)]
[t.start() for t in ts]; [t.join() for t in ts]
ru = resource.getrusage(resource.RUSAGE_SELF)
print('%s %s: %d requests of %d bytes in %.1f s: %s; server CPU %.2f s, client %.2f s' % (ctype, shape, sum(codes.values()), len(body),
      time.time() - t0, dict(codes), cpu() - c0, ru.ru_utime + ru.ru_stime))
