#!/usr/bin/env python3
"""term4.py: the fourth pass's terminal probe against a daemon started with
a small --terminal-max-events (start3.sh, EXTRA="--terminal-max-events 500",
so 50 per identity): bob keeps 10 events; alice then writes N events each in
a new session id (and carol, with only the route scope, tries too); bob's
history must still hold his 10. Then learned answers with
--terminal-share-learned: what alice teaches must not be suggested to bob."""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import t, proc
H = {"Connect-Protocol-Version": "1"}
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
r = os.urandom(3).hex()
for i in range(10):
    st, _ = t("TrackInputEvent", {"sessionId": "bob-" + r, "promptText": f"Which env {i}?", "inputText": "staging", "success": True, "inputSource": "user_typed"}, "bob", headers=H)
print("bob wrote 10, last", st, proc())
codes = {}
t0 = time.time()
for i in range(n):
    st, _ = t("TrackInputEvent", {"sessionId": f"a{i}-{r}", "promptText": "Continue? [y/N]", "inputText": "y", "success": True, "inputSource": "user_typed"}, "alice", headers=H)
    codes[st] = codes.get(st, 0) + 1
print(f"alice wrote {n} in {n} sessions in {time.time()-t0:.1f}s: {codes}", proc())
st, h = t("GetSessionHistory", {"sessionId": "bob-" + r, "limit": 100}, "bob", headers=H)
print("bob's history:", st, len(h.get("events", [])) if isinstance(h, dict) else h)
got = 0
for i in range(n - 60, n):
    st, h = t("GetSessionHistory", {"sessionId": f"a{i}-{r}", "limit": 10}, "alice", headers=H)
    got += len(h.get("events", [])) if isinstance(h, dict) else 0
print("alice's last 60 sessions hold", got, "events")
st, h = t("TrackInputEvent", {"sessionId": "c-" + r, "promptText": "x", "inputText": "y", "success": True, "inputSource": "user_typed"}, "carol", headers=H)
print("carol (route only) TrackInputEvent:", st)
# learned answers across identities with --terminal-share-learned
for i in range(5):
    t("TrackInputEvent", {"sessionId": f"teach-{r}", "promptText": "Deploy target cluster:", "inputText": "alice-prod-eu7", "success": True, "inputSource": "user_typed"}, "alice", headers=H)
st, inf = t("InferExpectedInput", {"promptText": "Deploy target cluster:", "sessionId": f"other-{r}"}, "alice", headers=H)
print("alice, another session:", st, "alice-prod-eu7" in str(inf))
st, inf = t("InferExpectedInput", {"promptText": "Deploy target cluster:", "sessionId": f"bobs-{r}"}, "bob", headers=H)
print("bob, his session:", st, "LEAK" if "alice-prod-eu7" in str(inf) else "not suggested")
st, inf = t("InferExpectedInput", {"promptText": "Deploy target cluster:", "sessionId": f"teach-{r}"}, "bob", headers=H)
print("bob, alice's session id:", st, "LEAK" if "alice-prod-eu7" in str(inf) else "not suggested", str(inf)[:100])
st, h = t("GetSessionHistory", {"sessionId": f"teach-{r}", "limit": 10}, "bob", headers=H)
print("bob reads alice's session id:", st, "LEAK" if "alice-prod-eu7" in str(h) else "nothing", str(h)[:80])
