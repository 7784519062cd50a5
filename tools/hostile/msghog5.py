#!/usr/bin/env python3
"""msghog5.py SECONDS CONC [MSGS [WORDS]]: the fifth pass's conversation hog:
alice sends CONC concurrent Routes whose conversation holds MSGS (63)
messages of WORDS (400) unique hex words each (every turn one model run at
its 256 tokens) over HTTP/JSON for SECONDS; prints the answers' codes and
the daemon's CPU and RSS. Run victim4.py beside it."""
import sys, os, time, threading, random, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import c, proc
secs, conc = float(sys.argv[1]), int(sys.argv[2])
msgs = int(sys.argv[3]) if len(sys.argv) > 3 else 63
words = int(sys.argv[4]) if len(sys.argv) > 4 else 400
codes = collections.Counter(); t0 = time.time(); p0 = proc(); lat = []
def run():
    while time.time() - t0 < secs:
        m = [{"role": "user", "content": " ".join("%x" % random.randrange(1 << 40) for _ in range(words))} for _ in range(msgs)]
        s = time.time(); st, _ = c("Route", {"query": "%x open a pull request" % random.randrange(1 << 40), "messages": m}, "alice", timeout=120)
        codes[st] += 1; lat.append(time.time() - s)
ths = [threading.Thread(target=run) for _ in range(conc)]
for th in ths: th.start()
for th in ths: th.join()
p1 = proc(); lat.sort()
print("route hog", dict(codes), "call p50 %.1fs" % lat[len(lat)//2], "cpu %.1fs in %.0fs" % (p1["cpu"] - p0["cpu"], time.time() - t0), "rss", p0["rss"], "->", p1["rss"], "load", p1["load"])
