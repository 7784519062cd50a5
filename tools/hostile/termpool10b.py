#!/usr/bin/env python3
"""termpool10b.py: do many identities together push out bob's terminal
events? Against a start10b.sh daemon started with a small store (DIR,
EXTRA="--terminal-max-events 500", so 50 per identity): bob writes 10
events; then m0..m{K-1} (K default 12) write 60 events each, each in its own
sessions; then bob's history is read."""
import json, os, sys, threading, urllib.request, uuid
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h10d"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip()}
K = int(os.environ.get("K", 12))
def t(method, body, who):
    req = urllib.request.Request(f"http://{env['HTTP']}/terminal.v1.TerminalService/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=30) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: return e.code, e.read().decode()[:150]
R = uuid.uuid4().hex[:6]
for i in range(10):
    t("TrackInputEvent", {"sessionId": f"bob-{R}", "promptText": f"Which env {i}? ", "inputText": "staging", "success": True, "inputSource": "user_typed"}, "bob")
print("bob's history before:", len(t("GetSessionHistory", {"sessionId": f"bob-{R}", "limit": 100}, "bob")[1].get("events", [])))
def w(who):
    for i in range(60):
        t("TrackInputEvent", {"sessionId": f"{who}-{i%5}-{R}", "promptText": "Continue? [y/N] ", "inputText": "y", "success": True, "inputSource": "user_typed"}, who)
ts = [threading.Thread(target=w, args=(f"m{i}",)) for i in range(K)]
[x.start() for x in ts]; [x.join() for x in ts]
print(f"{K} identities wrote 60 events each")
print("bob's history after:", len(t("GetSessionHistory", {"sessionId": f"bob-{R}", "limit": 100}, "bob")[1].get("events", [])))
