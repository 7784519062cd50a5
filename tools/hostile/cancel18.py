#!/usr/bin/env python3
"""cancel18.py DIR N: the eighteenth pass's forwarded-call places (mcpserver heldPlace) against
notifications/cancelled: with the proxy's shared "evil" backend in mode "hang" (DIR/evil.mode), caller
sends N call_tool evil/echo on one session, each on its own connection, and cancels each (its own
notifications/cancelled) after 0-300 ms, all at once from threads; then caller's and ops's honest
calls (call_tool everything/echo) must be answered at once. Prints the answers to the cancelled calls,
the honest calls' times, the proxy's goroutines before, after, and 10 s later."""
import os, sys, json, time, threading, random, collections, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, N = sys.argv[1], int(sys.argv[2])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
def gor(): return [l for l in urllib.request.urlopen('http://' + env['PROXY_METRICS'] + '/metrics').read().decode().splitlines() if l.startswith('go_goroutines')][0]
s = mcp10.Session(env['PROXY'], tok['caller'], timeout=120)
print('before', gor(), flush=True)
res = collections.Counter(); lk = threading.Lock()
def one(i):
    def cancel():
        time.sleep(random.random() * 0.3)
        s.post({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': 9000 + i, 'reason': 'x'}})
    threading.Thread(target=cancel).start()
    t = time.time()
    try:
        st, r, _ = s.post({'jsonrpc': '2.0', 'id': 9000 + i, 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': 'evil', 'tool': 'echo', 'arguments': {}}}})
        k = '%s %s' % (st, (r['result']['content'][0]['text'][:110] if isinstance(r, dict) and 'result' in r else json.dumps(r)[:110]) if r != '' else 'empty')
    except Exception as e: k = type(e).__name__
    with lk: res[k] += 1
ts = [threading.Thread(target=one, args=(i,)) for i in range(N)]; t0 = time.time(); [t.start() for t in ts]; [t.join() for t in ts]
print('cancelled calls in %.1f s:' % (time.time() - t0)); [print('  %5d %s' % (v, k)) for k, v in res.most_common(8)]
print('after', gor(), flush=True)
for who in ('caller', 'ops'):
    x = mcp10.Session(env['PROXY'], tok[who], timeout=60); t = time.time()
    st, r = x.tool('call_tool', {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}})
    print('  %s honest echo: %s %s in %.0f ms' % (who, st, json.dumps(r)[:100], (time.time() - t) * 1000), flush=True)
time.sleep(10); print('10 s later', gor())
