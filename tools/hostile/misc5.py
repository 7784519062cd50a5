#!/usr/bin/env python3
"""misc5.py: the fifth pass's assorted checks over HTTP/JSON: WatchExposure
over Connect server streaming (the per-session bound through vanguard),
one identity's session flood (CreateSession until refused), Route with a
64-message conversation at the limits, GET /tools as a non-admin, and an
unknown method's path; prints answers, counts and the daemon's RSS/fds."""
import sys, os, json, time, socket, http.client
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, tok, c, proc
fds = lambda: len(os.listdir(f"/proc/{env['PID']}/fd"))
host, port = env["HTTP"].split(":")
print("start", proc(), "fds", fds())
c("CreateSession", {"sessionId": "w5"}, "alice")
conns, codes = [], {}
for i in range(20):
    h = http.client.HTTPConnection(host, int(port), timeout=5)
    body = json.dumps({"sessionId": "w5"}).encode()
    env_ = b"\x00" + len(body).to_bytes(4, "big") + body
    h.request("POST", "/classifier.v1.ClassifierService/WatchExposure", env_, {"Content-Type": "application/connect+json",
              "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok["alice"]})
    conns.append(h)
time.sleep(1)
print("20 watches open", proc(), "fds", fds())
c("UpdateExposure", {"sessionId": "w5", "mode": "MODE_ALL"}, "alice")
for h in conns:
    try:
        r = h.getresponse()
        first = r.read1(300) if r.status == 200 else r.read()
        k = (r.status, b"resource_exhausted" in first)
    except Exception as e:
        k = ("no answer", type(e).__name__)
    codes[k] = codes.get(k, 0) + 1
print("watches over connect (status, refused in stream):", codes, proc(), "fds", fds())
for h in conns: h.close()
n, t0, last = 0, time.time(), None
while time.time() - t0 < 20:
    st, r = c("CreateSession", {}, "bob")
    if st != 200: last = (st, str(r)[:120]); break
    n += 1
print("bob created", n, "sessions, then", last, proc())
msgs = [{"role": "user", "content": "%d open a pull request and deploy the service then check the logs " % i * 8} for i in range(64)]
t = time.time(); st, r = c("Route", {"query": "now do it", "messages": msgs}, "alice"); p = proc()
print("Route 64 messages", st, "%.2fs" % (time.time() - t), str(r)[:100], p)
print("GET /tools as alice", c("", None, "alice", raw=None)[0] if False else "")
import urllib.request
for who in ["alice", "ops"]:
    req = urllib.request.Request(f"http://{env['HTTP']}/tools?context=github%20issue", headers={"Authorization": "Bearer " + tok[who]})
    try: r = urllib.request.urlopen(req); print("GET /tools", who, r.status, r.read()[:80])
    except urllib.error.HTTPError as e: print("GET /tools", who, e.code, e.read()[:120])
