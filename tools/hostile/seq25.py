#!/usr/bin/env python3
"""seq25.py DIR [WHO] (twenty-fifth pass): what one honest HTTP/2 connection (httpx, TLS, kept alive) gets for a
few request sequences while its peer may be penalized (run it beside a flood): S1 the explain page's public GETs
(/ and /favicon.ico, 404) then a POST GetIndexInfo with WHO's token (default bob); S2 a Route with a wrong token
(401) then with the right one; S3 five Routes with the right token. Each request prints its status or the
exception, and the connections the client opened (a new one after a close)."""
import sys, httpx

d = sys.argv[1]; who = sys.argv[2] if len(sys.argv) > 2 else "bob"
env = dict(l.strip().split("=", 1) for l in open(d + "/env") if "=" in l)
tok = [l.split()[2] for l in open(d + "/tokens") if l.split()[0] == who][0]
base = "https://" + env["HTTP"]
R = "/classifier.v1.ClassifierService/"
seqs = {
    "S1": [("GET", "/", None, None), ("GET", "/favicon.ico", None, None), ("POST", R + "GetIndexInfo", tok, {})],
    "S2": [("POST", R + "Route", "wrong", {"query": "list files"}), ("POST", R + "Route", tok, {"query": "list files"})],
    "S3": [("POST", R + "Route", tok, {"query": "list files"})] * 5,
}
for name, seq in seqs.items():
    conns = set()
    out = []
    with httpx.Client(http2=True, verify=env.get("CERT", False), timeout=10) as c:
        for m, p, t, body in seq:
            h = {"authorization": "Bearer " + t} if t else {}
            try:
                r = c.request(m, base + p, headers=h, json=body) if body is not None else c.request(m, base + p, headers=h)
                s = r.extensions.get("network_stream")
                conns.add(id(s.get_extra_info("socket")) if s else None)
                out.append(f"{p.rsplit('/', 1)[-1] or '/'} {r.status_code}")
            except Exception as e:
                out.append(f"{p.rsplit('/', 1)[-1] or '/'} {type(e).__name__}")
    print(name, ", ".join(out), f"({len(conns)} sockets)")
