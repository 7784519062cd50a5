#!/usr/bin/env python3
"""turn17b.py DIR MODE N SERVER [FIRST]: identities iFIRST..i(FIRST+N-1) (default FIRST 0) each start a
backend of the per-identity SERVER (call_tool SERVER read_graph-like: TOOL from $TOOL, default
read_graph, arguments {}), all at once, and the proxy's children are counted every 0.2 s.
MODE "plain": one call per identity (the pacing: 8 at once, then 2 a second).
MODE "cancel": per identity a leader call (session 1), then 0.4 s later a follower call of the same
  identity and server (session 2), then the leader is cancelled (notifications/cancelled on session 1):
  the follower, woken by the leader's turn ending, starts the backend without a turn of its own.
Prints per identity the follower's (or the call's) status and time, and the children over time, the
proxy's CPU and RSS."""
import os, sys, json, time, threading, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, mode, N, server = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
tool = os.environ.get('TOOL', 'read_graph')
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = int(env['PROXY_PID'])
def kids():
    out = subprocess.run(['ps', '-e', '-o', 'pid=,ppid=,rss='], capture_output=True, text=True).stdout.split()
    rows = [tuple(map(int, out[i:i + 3])) for i in range(0, len(out), 3)]
    return sum(1 for p, pp, r in rows if pp == pid)
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return 'proxy RSS %d MB CPU %.1f s; children %d; load %s' % (s['VmRSS'], (int(f[11]) + int(f[12])) / 100, kids(), open('/proc/loadavg').read().split()[0])
print('before', st(), flush=True)
base = kids()
sess = {}
for k in range(first, first + N):  # sessions opened first: the starts are what is timed
    who = 'i%d' % k
    sess[k] = (mcp10.Session(env['PROXY'], tok[who], timeout=120), mcp10.Session(env['PROXY'], tok[who], timeout=120))
res = {}; lk = threading.Lock(); t0 = time.time()
def call(s, i):
    return s.post({'jsonrpc': '2.0', 'id': i, 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': server, 'tool': tool, 'arguments': {}}}})
def summary(r):
    if isinstance(r, list): r = r[-1]
    if isinstance(r, dict) and 'result' in r:
        x = r['result']
        return ('err ' + x['content'][0]['text'][:70]) if x.get('isError') else 'ok'
    return repr(r)[:70]
def one(k):
    s1, s2 = sess[k]
    if mode == 'plain':
        st_, r, _ = call(s1, 1000)
        with lk: res[k] = (time.time() - t0, summary(r))
        return
    lead = {}
    lt = threading.Thread(target=lambda: lead.setdefault('r', call(s1, 1000))); lt.start()
    time.sleep(0.4)
    ft = threading.Thread(target=lambda: lead.setdefault('f', call(s2, 2000))); ft.start()
    time.sleep(0.1)
    s1.post({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': 1000, 'reason': 'x'}})
    ft.join()
    with lk: res[k] = (time.time() - t0, summary(lead['f'][1]))
    lt.join(timeout=30)
ths = [threading.Thread(target=one, args=(k,)) for k in sess]
[t.start() for t in ths]
curve = []
while any(t.is_alive() for t in ths) and time.time() - t0 < 90:
    curve.append((round(time.time() - t0, 1), kids() - base)); time.sleep(0.2)
[t.join() for t in ths]
curve.append((round(time.time() - t0, 1), kids() - base))
print('children started over time (s, n):', [c for i, c in enumerate(curve) if i % 3 == 0 or i == len(curve) - 1])
outs = {}
for k, (t, s) in sorted(res.items()):
    outs[s] = outs.get(s, 0) + 1
print('answers:', outs)
print('answer times (s):', sorted(round(t, 1) for t, s in res.values()))
print('after', st())
