#!/usr/bin/env python3
"""empty14a.py HOST:PORT RATE SECS [LIVE]: no token, no TLS, no request: open RATE TCP connections a
second and close each at once (an empty connection counts as an early reset of the local peer);
with LIVE > 0, also keep LIVE connections open that send nothing (they wait in the tarpit's queue
while the peer is penalized), replacing those the server closes. Prints what it did."""
import socket, sys, time, select
host, port = sys.argv[1].rsplit(':', 1); port = int(port)
rate, secs = float(sys.argv[2]), float(sys.argv[3]); live = int(sys.argv[4]) if len(sys.argv) > 4 else 0
t0 = time.time(); n = 0; held = []; reopened = 0
while time.time() - t0 < secs:
    s = time.time()
    try:
        c = socket.create_connection((host, port), timeout=2); c.close(); n += 1
    except OSError:
        pass
    # keep LIVE connections open; drop those the server closed
    keep = []
    for c in held:
        r, _, _ = select.select([c], [], [], 0)
        if r:
            try:
                if c.recv(1, socket.MSG_PEEK) == b'':
                    c.close(); continue
            except OSError:
                c.close(); continue
        keep.append(c)
    held = keep
    while len(held) < live:
        try:
            c = socket.create_connection((host, port), timeout=2); held.append(c); reopened += 1
        except OSError:
            break
    time.sleep(max(0, 1 / rate - (time.time() - s)))
print('empty14a: %d empty connections, %d live ones opened, in %.0f s' % (n, reopened, time.time() - t0))
