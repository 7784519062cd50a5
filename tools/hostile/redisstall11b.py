#!/usr/bin/env python3
"""redisstall11b.py: Redis stopped (SIGSTOP, STALL seconds, then SIGCONT) mid-call under a start10b.sh daemon with --state redis (DIR, REDIS_PID): alice's CreateSession and TrackInputEvent go on throughout; prints each call's status counts per phase and whether every session and event answered OK is still there after."""
import json, os, signal, sys, threading, time, urllib.request, uuid
D = os.environ["DIR"]; RP = int(os.environ["REDIS_PID"]); STALL = float(os.environ.get("STALL", 6))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip()}
def call(svc, method, body, who="alice"):
    req = urllib.request.Request(f"http://{env['HTTP']}/{svc}/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=30) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        b = e.read().decode()
        try: return e.code, json.loads(b).get("code", b[:80])
        except Exception: return e.code, b[:80]
    except Exception as e: return 0, str(e)[:60]
R = uuid.uuid4().hex[:6]; phase = ["before"]; codes = {}; ok_events = []; ok_sessions = []; stop = False
def worker(k):
    i = 0
    while not stop:
        i += 1
        sid = f"s{k}-{i}-{R}"
        st, r = call("classifier.v1.ClassifierService", "CreateSession", {"sessionId": sid})
        codes.setdefault((phase[0], "CreateSession", st, r if st != 200 else ""), 0); codes[(phase[0], "CreateSession", st, r if st != 200 else "")] += 1
        if st == 200: ok_sessions.append(sid)
        st, r = call("terminal.v1.TerminalService", "TrackInputEvent", {"sessionId": f"t{k}-{R}", "promptText": f"Which env {i}? ", "inputText": "staging", "success": True, "inputSource": "user_typed"})
        key = (phase[0], "TrackInputEvent", st, r if st != 200 else "")
        codes[key] = codes.get(key, 0) + 1
        if st == 200: ok_events.append((f"t{k}-{R}", f"Which env {i}? "))
        time.sleep(0.05)
ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]; [t.start() for t in ts]
time.sleep(3); phase[0] = "stalled"; os.kill(RP, signal.SIGSTOP); time.sleep(STALL)
os.kill(RP, signal.SIGCONT); phase[0] = "resumed"; time.sleep(4); stop = True; [t.join() for t in ts]
for k in sorted(codes, key=str): print(codes[k], k)
lost_s = [s for s in ok_sessions if call("classifier.v1.ClassifierService", "GetSession", {"sessionId": s})[0] != 200]
hist = {}
for k in range(4):
    st, r = call("terminal.v1.TerminalService", "GetSessionHistory", {"sessionId": f"t{k}-{R}", "limit": 1000})
    hist[f"t{k}-{R}"] = {e.get("promptText") for e in (r.get("events", []) if st == 200 else [])}
lost_e = [e for e in ok_events if e[1] not in hist[e[0]]]
print(f"sessions answered OK {len(ok_sessions)}, missing after {len(lost_s)}; events answered OK {len(ok_events)}, missing after {len(lost_e)}")
print("load:", open("/proc/loadavg").read().strip())
