#!/usr/bin/env python3
"""seq26.py DIR WHO N PATH (twenty-sixth pass): N GETs of PATH with WHO's token, one after another on one httpx
HTTP/2 connection (TLS, kept alive), while the loopback peer may be penalized (run it beside a flood): prints
each status or exception and the sockets used. With PATH answered 4xx (`/tools/nosuchtool`), the eighth on a
penalized peer is closed hard (the early rule with a token), so its answer is lost."""
import sys, httpx

d, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(l.strip().split("=", 1) for l in open(d + "/env") if "=" in l)
tok = [l.split()[2] for l in open(d + "/tokens") if l.split()[0] == who][0]
out = []; socks = set()
with httpx.Client(http2=True, verify=False, timeout=10) as c:
    for i in range(n):
        try:
            r = c.get("https://" + env["HTTP"] + sys.argv[4], headers={"authorization": "Bearer " + tok})
            s = r.extensions.get("network_stream"); socks.add(id(s.get_extra_info("socket")))
            out.append(str(r.status_code))
        except Exception as e:
            out.append(type(e).__name__)
print(" ".join(out), f"({len(socks)} sockets)")
