#!/usr/bin/env python3
"""proxyhog11a.py: one identity (caller) keeps CONC search_tools / hub__analyze_prompt calls with
large queries (KB kilobytes of distinct clauses) in flight on the proxy for SECS s; another identity
(ops) times its small search_tools (p50/p99, errors) idle and meanwhile; the proxy's CPU and RSS.
With TARGET=daemon the same on the daemon's --mcp-listen (route tool; alice hogs, bob times);
TARGET=http: Route over --http-listen (Connect JSON), alice and bob.
usage: proxyhog11a.py DIR CONC KB SECS [TOOL]"""
import os, sys, json, time, threading, random, http.client
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, conc, kb, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]); tool = sys.argv[5] if len(sys.argv) > 5 else 'search_tools'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
daemon = os.environ.get('TARGET') in ('daemon', 'http')
httpmode = os.environ.get('TARGET') == 'http'
addr, pid = (env['MCP'], env['PID']) if daemon else (env['PROXY'], env['PROXY_PID'])
HOG, VIC, VTOOL = ('alice', 'bob', 'route') if daemon else ('caller', 'ops', 'search_tools')
if daemon and tool == 'search_tools': tool = 'route'
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def rss(): return int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
words = open('/usr/share/dict/words').read().split() if os.path.exists('/usr/share/dict/words') else ['w%d' % i for i in range(50000)]
class HTTPRoute:
    def __init__(self, addr, token): self.addr, self.token = addr.split(':'), token
    def tool(self, name, args):
        c = http.client.HTTPConnection(self.addr[0], int(self.addr[1]), timeout=120)
        c.request('POST', '/classifier.v1.ClassifierService/Route', json.dumps({'query': args['query']}), {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + self.token})
        r = c.getresponse(); b = r.read(); c.close()
        return 200, ({'result': {'isError': True}} if r.status != 200 else {'result': {}})
def session(addr, token): return HTTPRoute(env['HTTP'], token) if httpmode else mcp10.Session(addr, token)
def big():
    out = []; n = 0
    while n < kb * 1024:
        s = 'how do I %s the %s %s and %s it?' % tuple(random.choice(words) for _ in range(4)); out.append(s); n += len(s) + 1
    return ' '.join(out)
def victim(secs):
    v = session(addr, tok[VIC]); lat = []; errs = 0; t0 = time.time()
    while time.time() - t0 < secs:
        a = time.time(); c, r = v.tool(VTOOL, {'query': 'create an issue on github'}); lat.append((time.time() - a) * 1000)
        if c != 200 or 'isError": true' in json.dumps(r): errs += 1
        time.sleep(0.05)
    lat.sort(); return '%d calls, %d errors, p50 %.1f ms, p99 %.1f ms' % (len(lat), errs, lat[len(lat) // 2], lat[int(len(lat) * .99)])
print('idle:', victim(8), open('/proc/loadavg').read().split()[:3], flush=True)
stop = time.time() + secs; hc = {'n': 0, 'err': 0}
def hog():
    s = session(addr, tok[HOG])
    while time.time() < stop:
        args = {'query': big()} if tool in ('search_tools', 'route') else {'prompt': big()}
        c, r = s.tool(tool, args); hc['n'] += 1
        if c != 200 or 'isError": true' in json.dumps(r)[:3000]: hc['err'] += 1; hc['last'] = json.dumps(r)[:200]
c0, r0 = cpu(), rss()
ts = [threading.Thread(target=hog) for _ in range(conc)]; [t.start() for t in ts]
time.sleep(2); print('during:', victim(secs - 4), flush=True)
[t.join() for t in ts]
print('hog calls', hc, 'proxy CPU %.1f s in %d s, RSS %d -> %d MB' % (cpu() - c0, secs, r0, rss()), open('/proc/loadavg').read().split()[:3])
