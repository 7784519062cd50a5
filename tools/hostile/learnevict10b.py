#!/usr/bin/env python3
"""learnevict10b.py: can other identities push out alice's learned reports?
Against a running start10b.sh daemon (var/h10b): alice makes A reports
(default 40), ops exports how many of alice's are kept; then the identities
m0..m{K-1} (default 50) each make N reports (default 410) at the default
--learn-report-rate, in parallel; then alice's count again. Reports are by
query (ReportUse {query, servers, shownServers}) over HTTP/JSON."""
import json, os, random, sys, threading, time, urllib.request
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h10b"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip() and not l.startswith("#")}
A, K, N = int(os.environ.get("A", 40)), int(os.environ.get("K", 50)), int(os.environ.get("N", 410))
S = ["github", "slack", "postgres", "sqlite", "filesystem", "memory", "fetch", "git"]
Q = ["create a github issue", "send slack message", "query postgres orders", "read the file", "fetch the page"]

def call(who, method, body):
    req = urllib.request.Request(f"http://{env['HTTP']}/classifier.v1.ClassifierService/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()[:300]

def kept(ident):
    n, page = 0, ""
    st, r = call("ops", "ExportLearning", {"identity": ident, "limit": 1000})
    if st != 200:
        return f"{st} {r}"
    return len(r.get("reports", []))

def report(who, n, codes):
    i = 0
    while i < n:
        st, _ = call(who, "ReportUse", {"query": f"{random.choice(Q)} {who} {i} {random.random()}", "servers": random.sample(S, 3), "shownServers": S})
        codes[st] = codes.get(st, 0) + 1
        if st == 200:
            i += 1
        elif st == 429:
            time.sleep(0.2)
        else:
            print(who, st); return

c = {}
report("alice", A, c)
print("alice reported:", c, "kept:", kept("token:alice"), "info:", call("ops", "GetIndexInfo", {})[1].get("learning"))
t0 = time.time()
codes = [{} for _ in range(K)]
ts = [threading.Thread(target=report, args=(f"m{i}", N, codes[i])) for i in range(K)]
[t.start() for t in ts]; [t.join() for t in ts]
tot = {}
for c in codes:
    for k, v in c.items():
        tot[k] = tot.get(k, 0) + v
print(f"{K} identities x {N} reports in {time.time()-t0:.0f} s: {tot}")
print("alice kept:", kept("token:alice"), "m0 kept:", kept("token:m0"), "info:", call("ops", "GetIndexInfo", {})[1].get("learning"))
print("load:", open("/proc/loadavg").read().strip())
