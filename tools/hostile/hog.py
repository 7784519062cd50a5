#!/usr/bin/env python3
"""One identity (alice) hogs: N threads sending KIND requests for SECONDS
over HTTP/JSON while tools/hostile/probe.sh measures bob's small Routes.
KIND: route (64 messages of 60 KB: ~3.8 MB), terminal (DetectInputPrompt, a
64 KiB tail of 10k lines with pathological text), regex (AnalyzePrompt of
256 KB built to stress the context patterns). Prints answers by HTTP code."""
import json, os, sys, threading, time, urllib.request
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
d = os.environ.get("DIR", os.path.join(root, "var/h"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "env")))
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, "tokens"))}
kind, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if kind == "route":
    path = "/classifier.v1.ClassifierService/Route"
    body = {"query": "deploy", "messages": [{"role": "user", "content": ("github issue pull request " * 2400)[:60000]} for _ in range(64)]}
    ct = {"Content-Type": "application/json"}
elif kind == "terminal":
    path = "/terminal.v1.TerminalService/DetectInputPrompt"
    lines = "\n".join(("Pａsswоrd " + "(y/n)? " * 8 + "\x1b[31m" + "é" * 20) for _ in range(10000))
    body = {"text": lines.encode()[:65536].decode("utf-8", "ignore")}
    ct = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
else:
    path = "/classifier.v1.ClassifierService/AnalyzePrompt"
    body = {"prompt": ("a" * 5000 + "=" + "/" * 5000 + "(" * 5000 + "://" + "1." * 5000 + "@" * 5000 + "\\u0000" + "` " * 5000)[:250000]}
    ct = {"Content-Type": "application/json"}
data = json.dumps(body).encode()
codes = {}; lat = []
def worker():
    end = time.time() + secs
    while time.time() < end:
        req = urllib.request.Request(f"http://{env['HTTP']}{path}", data, {**ct, "Authorization": "Bearer " + tok["alice"]})
        t0 = time.time()
        try:
            r = urllib.request.urlopen(req, timeout=30); r.read(); c = r.status
        except urllib.error.HTTPError as e:
            c = e.code; e.read()
        except Exception as e:
            c = type(e).__name__
        lat.append(time.time() - t0); codes[c] = codes.get(c, 0) + 1
ts = [threading.Thread(target=worker) for _ in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
lat.sort()
print(f"hog {kind} x{n}: {len(data)} bytes each, answers {codes}, p50 {lat[len(lat)//2]*1000:.0f} ms, load {open('/proc/loadavg').read().split()[0]}")
