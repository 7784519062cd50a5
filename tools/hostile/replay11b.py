#!/usr/bin/env python3
"""replay11b.py: ReportUse replaying another identity's request id, and request ids, session ids and names with odd characters (NUL, RTL marks, confusables, 10 KB, lone surrogates escaped) against a start10b.sh daemon (DIR); prints each status."""
import json, os, urllib.request
D = os.environ["DIR"]
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip()}
def call(method, body, who, svc="classifier.v1.ClassifierService", raw=None):
    req = urllib.request.Request(f"http://{env['HTTP']}/{svc}/{method}", raw if raw is not None else json.dumps(body).encode(),
        {"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=30) as r: return r.status, r.read().decode()[:120]
    except urllib.error.HTTPError as e: return e.code, e.read().decode()[:120]
req = urllib.request.Request(f"http://{env['HTTP']}/classifier.v1.ClassifierService/Route", json.dumps({"query": "create a github issue"}).encode(),
    {"Content-Type": "application/json", "Authorization": "Bearer " + tok["alice"]})
rid = json.loads(urllib.request.urlopen(req).read())["requestId"]
print("alice's request id", rid)
print("m0 replays alice's id:", call("ReportUse", {"requestId": rid, "servers": ["github"]}, "m0"))
print("ops (admin) replays alice's id:", call("ReportUse", {"requestId": rid, "servers": ["github"]}, "ops"))
print("alice, her own id, server that does not exist:", call("ReportUse", {"requestId": rid, "servers": ["no-such-server"]}, "alice"))
print("alice, her own id again (replay):", call("ReportUse", {"requestId": rid, "servers": ["github"]}, "alice"))
print("alice, 10,000 servers:", call("ReportUse", {"requestId": rid, "servers": [f"s{i}" for i in range(10000)]}, "alice"))
for name, v in [("NUL", "a\u0000b"), ("RTL mark", "\u202egithub"), ("confusable", "gіthub"), ("10 KB", "x" * 10000), ("zero-width", "git\u200bhub")]:
    print(f"request id {name}:", call("ReportUse", {"requestId": v, "servers": ["github"]}, "alice"))
    print(f"  server name {name}:", call("ReportUse", {"query": "open an issue", "servers": [v], "shownServers": ["github", v]}, "alice"))
    print(f"  session id {name}:", call("CreateSession", {"sessionId": v}, "alice"))
print("lone surrogate escaped:", call("ReportUse", None, "alice", raw=b'{"requestId":"\\ud800","servers":["github"]}'))
for s in ["alice-sess", "аlice-sess"]:  # Latin a, then Cyrillic а
    print("CreateSession", repr(s), call("CreateSession", {"sessionId": s}, "alice"), "bob GetSession:", call("GetSession", {"sessionId": s}, "bob"))
