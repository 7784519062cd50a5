#!/usr/bin/env python3
"""sessfill11.py: can identities that fill --max-sessions refuse a quiet one?
Against a running start10b.sh daemon (DIR, default var/h10b; its defaults:
--max-sessions 10000, --max-sessions-per-client 1000): the identities
m0..m{K-1} (default 10) each create N sessions (default 1000) over HTTP/JSON,
T threads each (default 4), so that together they fill the total; then bob,
who holds none, creates one (before the fix: RESOURCE_EXHAUSTED for the
whole --session-ttl); then B more (default 200) with their latency; then each
m tries one more (the busiest are refused); then how many of the m's first
sessions are gone (NOT_FOUND) and the daemon's session gauges."""
import json, os, sys, threading, time, urllib.request
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h10b"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip() and not l.startswith("#")}
K, N, T, B = (int(os.environ.get(k, d)) for k, d in (("K", 10), ("N", 1000), ("T", 4), ("B", 200)))

def call(who, method, body):
    req = urllib.request.Request(f"http://{env['HTTP']}/classifier.v1.ClassifierService/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read().decode()[:200]
        try:
            return e.code, json.loads(body).get("code", body)
        except ValueError:
            return e.code, body

def metrics():
    out = {}
    with urllib.request.urlopen(f"http://{env['METRICS']}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("classifierd_sessions_"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
    return out

def fill(who, lo, hi, codes):
    for i in range(lo, hi):
        st, r = call(who, "CreateSession", {"sessionId": f"{who}-{i}"})
        codes[st if st == 200 else (st, r)] = codes.get(st if st == 200 else (st, r), 0) + 1

t0 = time.time()
codes, ts = [], []
for m in range(K):
    for j in range(T):
        c = {}
        codes.append(c)
        ts.append(threading.Thread(target=fill, args=(f"m{m}", j * N // T, (j + 1) * N // T, c)))
[t.start() for t in ts]; [t.join() for t in ts]
tot = {}
for c in codes:
    for k, v in c.items():
        tot[k] = tot.get(k, 0) + v
print(f"{K} identities x {N} CreateSession in {time.time()-t0:.0f} s: {tot}")
print("metrics:", metrics())
st, r = call("bob", "CreateSession", {"sessionId": "bob-0"})
print("bob's first CreateSession:", st, r if st != 200 else "ok")
lat, bc = [], {}
for i in range(1, B + 1):
    s0 = time.perf_counter()
    st, r = call("bob", "CreateSession", {"sessionId": f"bob-{i}"})
    lat.append(time.perf_counter() - s0)
    bc[st if st == 200 else (st, r)] = bc.get(st if st == 200 else (st, r), 0) + 1
lat.sort()
print(f"bob's next {B} CreateSession: {bc}; p50 {1000*lat[len(lat)//2]:.1f} ms p99 {1000*lat[int(len(lat)*.99)-1]:.1f} ms")
more = {}
for m in range(K):
    st, r = call(f"m{m}", "CreateSession", {"sessionId": f"m{m}-extra"})
    more[st if st == 200 else (st, r)] = more.get(st if st == 200 else (st, r), 0) + 1
print("each m tries one more:", more)
gone = 0
for m in range(K):
    for i in range(0, N, max(1, N // 50)):
        st, _ = call(f"m{m}", "GetSession", {"sessionId": f"m{m}-{i}"})
        gone += st == 404
print(f"of {K}x{len(range(0, N, max(1, N // 50)))} sampled m sessions (oldest first), NOT_FOUND: {gone}")
print("metrics:", metrics())
print("load:", open("/proc/loadavg").read().strip())
