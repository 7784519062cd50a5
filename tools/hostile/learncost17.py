#!/usr/bin/env python3
"""learncost17.py BIN [BIN...]: the sixteenth hostile pass's open MED
(learning's per-Route cost grew with how many identities reported): bob's
Route latency over HTTP/JSON against each daemon binary in turn, each
phase on a fresh learn store of a start13a.sh daemon (DIR, default
var/h17c; PORTBASE, default 47300; learning by query at any rate):
  idle   no reports;
  one    7,000 reports by one identity (rep; 5,000 kept, MaxPerIdentity);
  fifty  9,500 reports by 50 identities (m0..m49, 190 each).
Reports are ReportUse by query (distinct paraphrases, three of eight
servers called, all shown), as learncost10.py makes them. Prints bob's
p50/p99 (ROUTES Routes, default 300, after 20 that make his fits) and the
daemon's CPU per Route, with the load average. PHASES picks phases
(default idle,one,fifty). Loopback only."""
import json, os, random, shutil, statistics, subprocess, sys, threading, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h17c"))
PORTBASE = os.environ.get("PORTBASE", "47300")
ROUTES = int(os.environ.get("ROUTES", "300"))
PHASES = os.environ.get("PHASES", "idle,one,fifty").split(",")
S = ["github", "slack", "postgres", "sqlite", "filesystem", "memory", "fetch", "git"]
Q = ["create a github issue", "send slack message", "query postgres orders", "read the file", "fetch the page"]

def call(env, tok, method, body):
    req = urllib.request.Request(f"http://{env['HTTP']}/classifier.v1.ClassifierService/{method}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + tok})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def start(binary):
    shutil.rmtree(os.path.join(D, "state"), ignore_errors=True)
    env = dict(os.environ, DIR=D, PORTBASE=PORTBASE, BIN=binary, TLS="0", LOGLEVEL="warn",
               EXTRA="--learn-report-rate 100000")
    out = subprocess.run(["bash", os.path.join(ROOT, "tools/hostile/start13a.sh")], env=env, capture_output=True, text=True, check=True).stdout
    e = dict(l.strip().split("=", 1) for l in out.splitlines() if "=" in l)
    return e

def routes(env, tok, n, tag, pid):
    c0 = cpu(pid)
    out = []
    for i in range(n):
        t = time.perf_counter()
        st, _ = call(env, tok, "Route", {"query": f"{random.choice(Q)} for the release {tag} {i}"})
        out.append((time.perf_counter() - t) * 1000)
        assert st == 200, st
    out.sort()
    return statistics.median(out), out[int(0.99 * len(out)) - 1], (cpu(pid) - c0) * 1000 / n

def report(env, tok, who, count, k, lock):
    i = 0
    while i < count:
        st, r = call(env, tok[who], "ReportUse", {"query": f"{random.choice(Q)} {who} {i} {random.random():.6f}", "servers": random.sample(S, 3), "shownServers": S})
        if st != 200:
            print("  report", who, st, str(r)[:200]); return
        i += 1
        with lock:
            k[0] += 1

def phase(binary, name):
    env = start(binary)
    pid = int(env["PID"])
    tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip() and not l.startswith("#")}
    try:
        k, lock = [0], threading.Lock()
        t0 = time.time()
        if name == "one":
            ts = [threading.Thread(target=report, args=(env, tok, "rep", 7000 // 4, k, lock)) for _ in range(4)]
        elif name == "fifty":
            def some(ids):
                for w in ids:
                    report(env, tok, w, 190, k, lock)
            ts = [threading.Thread(target=some, args=([f"m{i}" for i in range(j, 50, 4)],)) for j in range(4)]
        else:
            ts = []
        [t.start() for t in ts]; [t.join() for t in ts]
        routes(env, tok["bob"], 20, "w", pid)  # bob's fits, once
        p50, p99, c = routes(env, tok["bob"], ROUTES, name, pid)
        _, info = call(env, tok["ops"], "GetIndexInfo", {})
        n = info.get("learning", {}).get("reports", 0) if isinstance(info, dict) else "?"
        print(f"  {name:6s} {k[0]:5d} reports ({n} kept) in {time.time() - t0:4.0f} s   bob p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  daemon CPU {c:5.1f} ms/Route  load {open('/proc/loadavg').read().split()[0]}", flush=True)
    finally:
        os.kill(pid, 15)
        for _ in range(100):
            if not os.path.exists(f"/proc/{pid}"):
                break
            time.sleep(0.1)

if __name__ == "__main__":
    for b in sys.argv[1:]:
        print(os.path.abspath(b), flush=True)
        for ph in PHASES:
            phase(os.path.abspath(b), ph)
