#!/usr/bin/env python3
"""mcpbatch13a.py: MCP batches (protocol 2025-03-26, which allows them) of 64 tools/list on the
daemon's --mcp-listen or the proxy's (TARGET=MCP|PROXY), answers never read: each identity in IDS
opens one session, then CONNS connections per identity each POST the batch (3.6 KB; the answer is
about 0.9 MB on the daemon, 0.3 MB on the proxy) with a 4 KB receive buffer and read nothing for
HOLD s; prints the target's RSS, CPU and goroutines (METRICS) every 2 s and what the connections saw.
usage: mcpbatch13a.py DIR TARGET CONNS HOLD IDS..."""
import os, sys, json, time, socket, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, target, conns, hold, ids = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID'] if target == 'PROXY' else env['PID']
met = env['PROXY_METRICS'] if target == 'PROXY' else env['METRICS']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().split()
    try: g = [l.split()[1] for l in urllib.request.urlopen(f'http://{met}/metrics', timeout=5).read().decode().splitlines() if l.startswith('go_goroutines ')][0]
    except Exception: g = '?'
    return 'RSS %d MB (peak %d) cpu %.1fs goroutines %s load %s' % (s['VmRSS'], s['VmHWM'], (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK'), g, open('/proc/loadavg').read().split()[0])
host, port = env[target].split(':')
def mk(n): return json.dumps([{'jsonrpc': '2.0', 'id': n * 64 + i + 1, 'method': os.environ.get('METHOD', 'tools/list')} for i in range(64)]).encode()
sids = {who: mcp10.Session(env[target], tok[who], version='2025-03-26').sid for who in ids}
print('before', st(), flush=True)
socks = []; t0 = time.time()
for i in range(conns):
    for who in ids:
        batch = mk(len(socks))
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.connect((host, int(port)))
            s.sendall(b'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n'
                      b'Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-03-26\r\n'
                      b'Content-Length: %d\r\n\r\n%s' % (tok[who].encode(), sids[who].encode(), len(batch), batch))
            socks.append(s)
        except Exception as e:
            print('conn', e); break
print('sent %d in %.1fs' % (len(socks), time.time() - t0), st(), flush=True)
for k in range(hold // 2):
    time.sleep(2); print('%3ds' % (2 * k + 2), st(), flush=True)
seen = {}
for s in socks:
    s.settimeout(0.05)
    try: l = s.recv(64).split(b'\r\n')[0]
    except Exception as e: l = type(e).__name__.encode()
    seen[l] = seen.get(l, 0) + 1
print('status lines', seen)
for s in socks: s.close()
time.sleep(3); print('after close', st())
