#!/usr/bin/env python3
"""scrape16a.py HOST:PORT CONNS SECS [PATH] [GZIP] [BATCH]: no token: each of CONNS threads keeps one
keep-alive connection to a plaintext listener (default --metrics-listen) and pipelines BATCH
(default 64) GET PATH requests (default /metrics; Accept-Encoding: gzip unless GZIP=0) at a time,
reading and discarding the answers' bytes (never parsing, never inflating): the sixteenth pass's
test of what a scrape costs the daemon against what it costs its client. Prints requests written,
bytes read and answers (counted by 'HTTP/1.1 ' status lines)."""
import os, socket, ssl, sys, time, threading
host, port = sys.argv[1].rsplit(':', 1); port = int(port)
conns, secs = int(sys.argv[2]), float(sys.argv[3])
path = sys.argv[4] if len(sys.argv) > 4 else '/metrics'
gz = (sys.argv[5] if len(sys.argv) > 5 else '1') != '0'
batch = int(sys.argv[6]) if len(sys.argv) > 6 else 64
req = ('GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n' % (path, port, 'Accept-Encoding: gzip\r\n' if gz else '')).encode()
tot = {'sent': 0, 'read': 0, 'answers': 0, 'errors': 0}; lk = threading.Lock()
def run():
    end = time.time() + secs
    while time.time() < end:
        try:
            s = socket.create_connection((host, port), timeout=10)
            if os.environ.get('TLS') == '1':
                x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE; x.set_alpn_protocols(['http/1.1'])
                s = x.wrap_socket(s, server_hostname=host)
            while time.time() < end:
                s.sendall(req * batch); want = batch; got = 0; n = 0; tail = b''
                while got < want:
                    b = s.recv(1 << 20)
                    if not b: raise OSError('closed')
                    n += len(b); x = tail + b; got += x.count(b'HTTP/1.1 '); tail = x[-9:]
                with lk: tot['sent'] += batch; tot['read'] += n; tot['answers'] += got
            s.close()
        except OSError:
            with lk: tot['errors'] += 1
ts = [threading.Thread(target=run) for _ in range(conns)]
[t.start() for t in ts]; [t.join() for t in ts]
print('scrape16a: %(sent)d requests, %(answers)d answers, %(read)d bytes read, %(errors)d connection errors' % tot,
      '%.0f answers/s' % (tot['answers'] / secs))
