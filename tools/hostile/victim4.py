#!/usr/bin/env python3
"""victim4.py SECONDS [https]: bob's small Routes one after another over
HTTP/JSON (TLS, unverified, with https) while a probe runs; prints the
count, statuses, p50, p99 and max latency in ms, and the daemon's RSS."""
import json, os, ssl, sys, time, urllib.request, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, tok, proc
secs = float(sys.argv[1]); scheme = sys.argv[2] if len(sys.argv) > 2 else "http"
ctx = ssl._create_unverified_context()
lat, codes, t0, peak = [], collections.Counter(), time.time(), 0
while time.time() - t0 < secs:
    req = urllib.request.Request(f"{scheme}://{env['HTTP']}/classifier.v1.ClassifierService/Route",
        json.dumps({"query": "open a pull request on github"}).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer " + tok["bob"]})
    s = time.time()
    try:
        r = urllib.request.urlopen(req, timeout=30, context=ctx if scheme == "https" else None); r.read(); codes[r.status] += 1
    except urllib.error.HTTPError as e:
        codes[e.code] += 1
    except Exception as e:
        codes[type(e).__name__] += 1
    lat.append((time.time() - s) * 1000)
    peak = max(peak, proc()["rss"])
    time.sleep(0.05)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"victim: {len(lat)} Routes {dict(codes)} p50 {q(.5):.1f} p99 {q(.99):.1f} max {lat[-1]:.1f} ms; peak RSS {peak} MB; {proc()}")
