#!/usr/bin/env python3
"""mcpsessfill11.py: can identities that fill --max-sessions with MCP
sessions refuse a quiet one? Against a running start10b.sh daemon (DIR,
default var/h10b; start it with EXTRA="--max-sessions 1000
--max-sessions-per-client 100" to keep the run short): the identities
m0..m{K-1} (default 10) each open N MCP sessions on --mcp-listen (default 100;
initialize, then notifications/initialized), T threads each (default 4), so
that together they fill the total; then bob, who holds none, opens one
(before the fix: 503 until the others' sessions expire); then B more (default
50) with their latency; then each m tries one more (the busiest are refused
503); then how many of the m's sessions, oldest first, are gone (404 to a
tools/list) and the daemon's MCP session series."""
import json, os, threading, time, urllib.request
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h10b"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip() and not l.startswith("#")}
K, N, T, B = (int(os.environ.get(k, d)) for k, d in (("K", 10), ("N", 100), ("T", 4), ("B", 50)))
URL = f"http://{env['MCP']}/mcp"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fill", "version": "1"}}}

def post(who, body, sid=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "Authorization": "Bearer " + tok[who]}
    if sid:
        h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = sid, "2025-06-18"
    req = urllib.request.Request(URL, json.dumps(body).encode(), h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read(4096)
            return r.status, r.headers.get("Mcp-Session-Id")
    except urllib.error.HTTPError as e:
        e.read()
        return e.code, None

def open_session(who):
    st, sid = post(who, INIT)
    if st == 200 and sid:
        post(who, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    return st, sid

def metrics():
    out = {}
    with urllib.request.urlopen(f"http://{env['METRICS']}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("classifierd_mcp_sessions"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
    return out

sids = {f"m{m}": [] for m in range(K)}
lock = threading.Lock()

def fill(who, n, codes):
    for _ in range(n):
        st, sid = open_session(who)
        codes[st] = codes.get(st, 0) + 1
        if sid:
            with lock:
                sids[who].append(sid)

t0 = time.time()
codes, ts = [], []
for m in range(K):
    for j in range(T):
        c = {}
        codes.append(c)
        ts.append(threading.Thread(target=fill, args=(f"m{m}", (j + 1) * N // T - j * N // T, c)))
[t.start() for t in ts]; [t.join() for t in ts]
tot = {}
for c in codes:
    for k, v in c.items():
        tot[k] = tot.get(k, 0) + v
print(f"{K} identities x {N} MCP initialize in {time.time()-t0:.0f} s: {tot}")
print("metrics:", metrics())
st, _ = open_session("bob")
print("bob's first initialize:", st)
lat, bc = [], {}
for i in range(B):
    s0 = time.perf_counter()
    st, _ = open_session("bob")
    lat.append(time.perf_counter() - s0)
    bc[st] = bc.get(st, 0) + 1
lat.sort()
print(f"bob's next {B} sessions (initialize + initialized): {bc}; p50 {1000*lat[len(lat)//2]:.1f} ms p99 {1000*lat[max(0, int(len(lat)*.99)-1)]:.1f} ms")
more = {}
for m in range(K):
    st, _ = open_session(f"m{m}")
    more[st] = more.get(st, 0) + 1
print("each m tries one more:", more)
gone = tried = 0
for m in range(K):
    for sid in sids[f"m{m}"][: max(1, N // 10)]:
        st, _ = post(f"m{m}", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
        tried += 1
        gone += st == 404
print(f"of the m's {tried} oldest sessions ({max(1, N // 10)} each), 404 to tools/list: {gone}")
print("metrics:", metrics())
print("load:", open("/proc/loadavg").read().strip())
