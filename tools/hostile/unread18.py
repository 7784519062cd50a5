#!/usr/bin/env python3
"""unread18.py DIR SECS WHO[,WHO..] K: the eighteenth pass's answer place held by a client that
never reads (mcpserver heldPlace). The proxy of startproxy17b.sh (DIR/env: PROXY, PROXY_PID), its
shared "evil" backend in mode "bigcall 3" (DIR/evil.mode: each tools/call answers 3 MB). Bob's small
calls (search_tools, call_tool everything/echo) for SECS s idle; then each WHO parks K call_tool
evil/echo (DIR/evil.mode "echo", argument q of ARGN (3,000,000) CH ("<") characters: the proxy escapes each "<" to 6 bytes) on raw sockets with a 4 KB receive buffer, never reading; bob for SECS s; then the parked
sockets are closed and bob for SECS s again. Prints bob's p50/p99/errors per phase, the proxy's CPU,
RSS and goroutines-ish (threads), the load."""
import os, sys, json, time, socket
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, secs, whos, K = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(','), int(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']; host, port = env['PROXY'].split(':')
def st():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    rss = [int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0]
    return (int(f[11]) + int(f[12])) / 100, rss
def bob(secs):
    s = mcp10.Session(env['PROXY'], tok[os.environ.get('VICTIM', 'bob')], timeout=30); lat = {'search': [], 'echo': []}; errs = {}; t0 = time.time()
    calls = [('search', 'search_tools', {'query': 'open a pull request on github'}),
             ('echo', 'call_tool', {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}})]
    i = 0
    while time.time() - t0 < secs:
        k, tool, args = calls[i % 2]; i += 1; t = time.time()
        try: code, r = s.tool(tool, args); ok = code == 200 and isinstance(r, dict) and 'result' in r and not r['result'].get('isError')
        except Exception as e: code, r, ok = type(e).__name__, None, False
        lat[k].append((time.time() - t) * 1000)
        if not ok:
            errs[k] = errs.get(k, 0) + 1
            if sum(errs.values()) <= 2: print('  bob error', k, code, repr(r)[:240], flush=True)
        time.sleep(0.05)
    out = []
    for k, l in lat.items():
        l.sort(); q = lambda p: l[min(len(l) - 1, int(p * len(l)))] if l else -1
        out.append('%s %d p50 %.1f p99 %.1f max %.0f' % (k, len(l), q(.5), q(.99), l[-1] if l else -1))
    return '; '.join(out) + ' ms; errors %s' % errs
def park(who, k):
    s = mcp10.Session(env['PROXY'], tok[who])
    socks = []
    for j in range(k):
        b = json.dumps({'jsonrpc': '2.0', 'id': 1000 + j, 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': 'evil', 'tool': 'echo', 'arguments': {'q': os.environ.get('CH', '<') * int(os.environ.get('ARGN', '3000000'))}}}}).encode()
        h = dict(s.h); h['Content-Length'] = str(len(b)); h['Host'] = env['PROXY']
        c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); c.connect((host, int(port)))
        c.sendall(('POST /mcp HTTP/1.1\r\n' + ''.join('%s: %s\r\n' % kv for kv in h.items()) + '\r\n').encode() + b)
        socks.append(c); time.sleep(float(os.environ.get('SPACING', '0')))
    return socks
def phase(name, fn=None):
    c0, r0 = st(); l0 = open('/proc/loadavg').read().split()[0]
    out = bob(secs); c1, r1 = st()
    th = len(os.listdir(f'/proc/{pid}/task'))
    print('%-8s bob %s\n         proxy CPU %.1f s in %.0f s, RSS %d -> %d MB, threads %d, load %s -> %s' % (name, out, c1 - c0, secs, r0, r1, th, l0, open('/proc/loadavg').read().split()[0]), flush=True)
phase('idle')
socks = []
for w in whos: socks += park(w, K)
time.sleep(2)
# how much did each parked socket get?
got = []
for c in socks:
    c.setblocking(False)
    try: x = c.recv(4096); got.append(len(x)); print('  parked answer starts', x[:60], x[-120:] if len(x) < 4096 else b'', flush=True) if len(got) < 99 and b'200 OK' not in x[:20] else None
    except BlockingIOError: got.append(0)
print('parked %d calls (%s x %d); first bytes readable on %d of them' % (len(socks), ','.join(whos), K, sum(1 for g in got if g)), flush=True)
phase('parked')
import urllib.request
print('  proxy', [l for l in urllib.request.urlopen('http://' + env['PROXY_METRICS'] + '/metrics').read().decode().splitlines() if l.startswith(('go_goroutines', 'go_memstats_heap_inuse'))], flush=True)
time.sleep(float(os.environ.get('HOLD', '0')))
phase('parked2') if os.environ.get('HOLD') else None
for c in socks: c.close()
time.sleep(1)
phase('closed')
