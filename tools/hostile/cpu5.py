#!/usr/bin/env python3
"""cpu5.py [CASE...]: the fifth pass's CPU amplification probe. Sends one
request per case over HTTP/JSON (token alice, or ops for admin methods) and
prints the daemon's CPU seconds (utime+stime from /proc/PID/stat) and wall
time it cost, the status, and the load average. Each text is made unique per
run so no cache answers it."""
import json, os, sys, time, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, tok, call
HZ = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open(f"/proc/{env['PID']}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ
def rss():
    for l in open(f"/proc/{env['PID']}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
N = 250_000
u = lambda: "%06x" % random.randrange(1 << 24)
cjk = lambda n: "".join(chr(0x4E00 + random.randrange(20000)) for _ in range(n))
cases = {
  "plain": lambda: ("C/Route", {"query": " ".join(u() for _ in range(N // 7))}),
  "dots": lambda: ("C/Route", {"query": u() + ".a" * (N // 2 - 4)}),
  "onebigword": lambda: ("C/Route", {"query": u() + "a" * (N - 8)}),
  "cjk": lambda: ("C/Route", {"query": u() + cjk(N // 3 - 4)}),
  "punct": lambda: ("C/Route", {"query": u() + "!?" * (N // 2 - 4)}),
  "fdfa": lambda: ("C/Route", {"query": u() + "\ufdfa" * (N // 3 - 4)}),
  "combining": lambda: ("C/Route", {"query": u() + "a" + "\u0301" * (N // 2 - 4)}),
  "hangul": lambda: ("C/Route", {"query": u() + "".join(chr(0xAC00 + random.randrange(11172)) for _ in range(N // 3 - 4))}),
  "emoji": lambda: ("C/Route", {"query": u() + "\U0001F600" * (N // 4 - 4)}),
  "detectctx_dots": lambda: ("C/DetectContexts", {"text": u() + ".a" * (N // 2 - 4)}),
  "detectctx_cjk": lambda: ("C/DetectContexts", {"text": u() + cjk(N // 3 - 4)}),
  "analyze_cjk": lambda: ("C/AnalyzePrompt", {"prompt": u() + cjk(N // 3 - 4)}),
  "classify_dots": lambda: ("C/Classify", {"text": u() + ".a" * (N // 2 - 4)}),
  "msgs_dots": lambda: ("C/Route", {"query": u(), "messages": [{"role": "user", "content": u() + ".a" * (N // 2 - 8)} for _ in range(15)]}),
  "embed_dots": lambda: ("C/Embed", {"texts": [u() + ".a" * 2000 for _ in range(64)]}),
  "detectprompt_cjk": lambda: ("T/DetectInputPrompt", {"text": u() + cjk(20000)}),
  "infer_cjk": lambda: ("T/InferExpectedInput", {"session_id": "cpu5", "prompt_text": u() + cjk(20000)}),
}
names = sys.argv[1:] or list(cases)
for n in names:
    m, body = cases[n]()
    path = ("classifier.v1.ClassifierService/" if m[0] == "C" else "terminal.v1.TerminalService/") + m[2:]
    c0, t0 = cpu(), time.time()
    st, out = call(path, body, "alice", timeout=300, headers={"Connect-Protocol-Version": "1"})
    c1, t1 = cpu(), time.time()
    s = json.dumps(out)[:100] if not isinstance(out, str) else out[:100]
    print(f"{n:18s} {st} cpu={c1-c0:6.2f}s wall={t1-t0:6.2f}s rss={rss()}MB bytes={len(json.dumps(body))} load={open('/proc/loadavg').read().split()[0]} {s}", flush=True)
