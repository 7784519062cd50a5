#!/usr/bin/env python3
"""embedhog5.py SECONDS CONC [WORDS [TEXTS]]: the fifth pass's CPU hog: alice sends CONC
concurrent Embed calls of TEXTS (64) unique texts of WORDS (400) hex words, about 4 KB (the model at its
256 tokens for each) over HTTP/JSON for SECONDS; prints the answers' codes,
the daemon CPU seconds used and its RSS. Run victim4.py beside it."""
import sys, os, json, time, threading, random, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import c, proc
secs, conc = float(sys.argv[1]), int(sys.argv[2])
words = int(sys.argv[3]) if len(sys.argv) > 3 else 400
ntexts = int(sys.argv[4]) if len(sys.argv) > 4 else 64
codes = collections.Counter(); t0 = time.time(); p0 = proc()
def run():
    while time.time() - t0 < secs:
        texts = [" ".join("%x" % random.randrange(1 << 40) for _ in range(words)) for _ in range(ntexts)]
        st, _ = c("Embed", {"texts": texts}, "alice", timeout=120)
        codes[st] += 1
ths = [threading.Thread(target=run) for _ in range(conc)]
for th in ths: th.start()
for th in ths: th.join()
p1 = proc()
print("embed hog", dict(codes), "cpu %.1fs in %.0fs" % (p1["cpu"] - p0["cpu"], time.time() - t0), "rss", p0["rss"], "->", p1["rss"], "hwm", p1["hwm"], "load", p1["load"])
