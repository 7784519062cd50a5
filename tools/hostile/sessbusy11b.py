#!/usr/bin/env python3
"""sessbusy11b.py: can many identities make a moderately busy one lose its hub sessions at --max-sessions (the busiest-makes-way rule)? Against a start10b.sh daemon (DIR): bob creates BOB sessions (default 300), then m0..m{K-1} (default 50) create N each (default 200) to pass --max-sessions 10000; prints how many of bob's are left and the codes the m's got."""
import json, os, threading, urllib.request
D = os.environ["DIR"]
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip()}
BOB, K, N = (int(os.environ.get(k, d)) for k, d in (("BOB", 300), ("K", 50), ("N", 200)))
def call(who, method, body):
    req = urllib.request.Request(f"http://{env['HTTP']}/classifier.v1.ClassifierService/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=60) as r: return r.status
    except urllib.error.HTTPError as e: return e.code
print("bob creates", BOB, {c: 1 for c in [call("bob", "CreateSession", {"sessionId": f"bob-{i}"}) for i in range(BOB)]})
codes = {}
def fill(m):
    for i in range(N):
        c = call(f"m{m}", "CreateSession", {"sessionId": f"m{m}-{i}"}); codes[c] = codes.get(c, 0) + 1
ts = [threading.Thread(target=fill, args=(m,)) for m in range(K)]; [t.start() for t in ts]; [t.join() for t in ts]
left = sum(call("bob", "GetSession", {"sessionId": f"bob-{i}"}) == 200 for i in range(BOB))
print(f"{K} identities x {N}: {codes}; bob's sessions left {left} of {BOB} (fair share of 10,000 among {K+1}: {10000//(K+1)})")
print("load:", open("/proc/loadavg").read().strip())
