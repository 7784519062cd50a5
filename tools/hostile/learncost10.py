#!/usr/bin/env python3
"""learncost10.py BIN [BIN...]: the eighth hostile pass's MED (learning's
per-request cost grew with the reports stored), measured against each
daemon binary in turn: bob's Route latency over HTTP/JSON idle, then after
N reports (REPORTS, default 7000) by seven other identities (ReportUse by
query, distinct paraphrases, three of eight servers called, all shown),
then while those identities keep reporting (FLOOD seconds, default 20).
Prints p50/p99 per phase with the load average, and the daemon's CPU per
Route idle and after the reports (steadier than the clock on a busy
machine). Loopback only; each
daemon gets its own temporary learn store and token file."""
import json, os, random, socket, statistics, subprocess, sys, tempfile, threading, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORTS = int(os.environ.get("REPORTS", "7000"))
FLOOD = float(os.environ.get("FLOOD", "20"))
WHO = [f"h{i}" for i in range(7)]
S = ["github", "slack", "postgres", "sqlite", "filesystem", "memory", "fetch", "git"]
Q = ["create a github issue", "send slack message", "query postgres orders", "read the file", "fetch the page"]

def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def call(base, tok, method, body):
    req = urllib.request.Request(f"http://{base}/classifier.v1.ClassifierService/{method}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + tok})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()

def cpu(pid):
    """The process's CPU seconds so far (user and system)."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def lat(base, tok, n, tag, pid=None):
    c0 = cpu(pid) if pid else 0
    out = []
    for i in range(n):
        t = time.perf_counter()
        st, _ = call(base, tok, "Route", {"query": f"{random.choice(Q)} for the release {tag} {i}"})
        out.append((time.perf_counter() - t) * 1000)
        assert st == 200, st
    out.sort()
    c = f"  daemon CPU {(cpu(pid) - c0) * 1000 / n:5.1f} ms/Route" if pid else ""
    return f"p50 {statistics.median(out):6.1f} ms  p99 {out[int(0.99 * len(out)) - 1]:6.1f} ms{c}"

def run(binary):
    d = tempfile.mkdtemp(prefix="learncost10.")
    toks = {w: f"tok-{w}-{random.getrandbits(64):016x}" for w in WHO + ["bob"]}
    tf = os.path.join(d, "tokens")
    with open(os.open(tf, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        for w, t in toks.items():
            f.write(f"{w} * {t}\n")
    g, h = free(), free()
    p = subprocess.Popen([binary, "--index", os.path.join(ROOT, "var/default.idx"), "--model", os.environ.get("MODEL_DIR", os.path.join(ROOT, ".cache/models/all-MiniLM-L6-v2-int8")),
                          "--ort-lib", os.environ.get("ORT_LIB", os.path.join(ROOT, ".cache/onnxruntime-1.24.3/libonnxruntime.so.1")), "--listen", f"127.0.0.1:{g}", "--http-listen", f"127.0.0.1:{h}",
                          "--learn-db", os.path.join(d, "learn.db"), "--learn-report-rate", "100000",
                          "--auth-token-file", tf, "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))
    base = f"127.0.0.1:{h}"
    try:
        for _ in range(300):
            try:
                if call(base, toks["bob"], "Route", {"query": "hello"})[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        print(f"{os.path.basename(os.path.dirname(os.path.dirname(binary)))}: {binary}")
        print(f"  idle            {lat(base, toks['bob'], 200, 'a', p.pid)}  load {open('/proc/loadavg').read().split()[0]}")
        k = [0]
        lock = threading.Lock()
        def report(who, until=None, count=None):
            i = 0
            while (until and time.time() < until) or (count and i < count):
                i += 1
                st, _ = call(base, toks[who], "ReportUse", {"query": f"{random.choice(Q)} {who} {i}", "servers": random.sample(S, 3), "shownServers": S})
                if st == 200:
                    with lock:
                        k[0] += 1
        ts = [threading.Thread(target=report, args=(w, None, REPORTS // len(WHO))) for w in WHO]
        t0 = time.time(); [t.start() for t in ts]; [t.join() for t in ts]
        print(f"  {k[0]} reports stored in {time.time() - t0:.0f} s")
        lat(base, toks['bob'], 20, 'w')  # bob's tallies are fitted on his first Routes: not per Route
        print(f"  after reports   {lat(base, toks['bob'], 200, 'b', p.pid)}  load {open('/proc/loadavg').read().split()[0]}")
        until = time.time() + FLOOD
        ts = [threading.Thread(target=report, args=(w, until)) for w in WHO[:3]]
        [t.start() for t in ts]
        print(f"  during a flood  {lat(base, toks['bob'], 100, 'c')}  load {open('/proc/loadavg').read().split()[0]}")
        [t.join() for t in ts]
    finally:
        p.terminate(); p.wait()

for b in sys.argv[1:]:
    run(os.path.abspath(b))
