#!/usr/bin/env python3
"""turnburn17b.py DIR SECS VICTIMS [STEP]: can one identity keep every other identity's per-identity
backends from starting? (mcpsrc.Isolated's start turns: one rate.Limiter, 2 a second after a burst of 8.)
 0. bob starts his own memory backend (before), and carol, ops, alice and caller start 10 backends (the
    burst and more), dave's first call 0.05 s after theirs.
 1. For SECS s dave alternates two per-identity servers he has no backend of (evil17pi, files): a
    tools/call that waits for its turn, then (STEP s later, default 0.1) a notifications/cancelled for
    the other server's waiting call. A cancelled rate.Limiter reservation that is not the last one gives
    nothing back, so each cycle uses up a start no one makes.
 2. 5 s in, VICTIMS identities i0.. each make their first call_tool memory/read_graph (a start each);
    bob keeps calling his running memory backend.
 3. After SECS, one more identity's first call (i(VICTIMS)) is timed.
Prints the victims' answers and times, bob's, dave's calls and their answers, the proxy's CPU."""
import os, sys, json, time, threading, collections
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, secs, V = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
step = float(sys.argv[4]) if len(sys.argv) > 4 else 0.1
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def cpu():
    f = open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100
TOOLS = {'memory': ('read_graph', {}), 'evmine': ('echo', {'message': 'hi'}), 'files': ('list_allowed_directories', {}),
         'evilpi': ('ping_evil', {}), 'evil17pi': ('ping17', {})}
def summary(r):
    if isinstance(r, list): r = r[-1] if r else None
    if isinstance(r, dict) and 'result' in r:
        x = r['result']
        return ('err ' + x['content'][0]['text'][:90]) if x.get('isError') else 'ok'
    return 'raw ' + repr(r)[:60]
def call(s, server, i=None):
    t, a = TOOLS[server]
    msg = {'jsonrpc': '2.0', 'id': i or next(s.ids), 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': server, 'tool': t, 'arguments': a}}}
    t0 = time.time()
    try:
        st, r, _ = s.post(msg)
        return time.time() - t0, summary(r)
    except Exception as e:
        return time.time() - t0, type(e).__name__
c0 = cpu()
bob = mcp10.Session(env['PROXY'], tok['bob'], timeout=120)
print('bob before:', call(bob, 'memory'), flush=True)
drain = [(w, s) for w in ('carol', 'ops') for s in ('memory', 'evmine', 'evilpi', 'evil17pi')] + [('alice', 'memory'), ('caller', 'memory')]
dsess = {w: mcp10.Session(env['PROXY'], tok[w], timeout=120) for w in ('carol', 'ops', 'alice', 'caller')}
keys = ['evil17pi', 'files']
sess = {k: mcp10.Session(env['PROXY'], tok['dave'], timeout=120) for k in keys}
out = {}
ths = [threading.Thread(target=lambda w=w, s=s: out.setdefault((w, s), call(dsess[w], s))) for w, s in drain]
[t.start() for t in ths]
time.sleep(0.05)
dave = collections.Counter(); lk = threading.Lock(); stop = [False]
def burn():
    n = 0; pending = {}
    t0 = time.time()
    while time.time() - t0 < secs:
        k = keys[n % 2]; other = keys[(n + 1) % 2]; i = 10000 + n
        def one(k=k, i=i):
            dt, s = call(sess[k], k, i)
            with lk: dave[s[:70]] += 1
        threading.Thread(target=one, daemon=True).start(); pending[k] = i
        time.sleep(step / 2)
        if other in pending:
            sess[other].post({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': pending.pop(other), 'reason': 'x'}})
        time.sleep(step / 2); n += 1
    for k, i in pending.items():
        sess[k].post({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': i, 'reason': 'x'}})
    with lk: dave['cycles'] = n
bt = threading.Thread(target=burn); t0 = time.time(); bt.start()
[t.join() for t in ths]
print('burst drained by carol, ops, alice, caller:', collections.Counter(v[1] for v in out.values()), 'max %.1f s' % max(v[0] for v in out.values()), flush=True)
time.sleep(max(0, 5 - (time.time() - t0)))
vic = {}
def victim(k):
    s = mcp10.Session(env['PROXY'], tok['i%d' % k], timeout=120)
    vic[k] = call(s, 'memory')
vs = [threading.Thread(target=victim, args=(k,)) for k in range(V)]
[t.start() for t in vs]
blat = []
while bt.is_alive():
    blat.append(call(bob, 'memory')); time.sleep(0.2)
[t.join() for t in vs]
print('dave (one identity) for %.0f s: %s' % (secs, dict(dave)))
print('victims\' first calls (started 5 s in):', sorted((round(t, 1), s) for t, s in vic.values()))
bl = sorted(t * 1000 for t, s in blat)
print('bob meanwhile: %d calls p50 %.1f ms max %.0f ms; %s' % (len(bl), bl[len(bl) // 2], bl[-1], collections.Counter(s for t, s in blat)))
s = mcp10.Session(env['PROXY'], tok['i%d' % V], timeout=120)
print('after: i%d first call' % V, call(s, 'memory'))
print('proxy CPU %.1f s over the run; load %s' % (cpu() - c0, open('/proc/loadavg').read().split()[0]))
