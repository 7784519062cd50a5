#!/usr/bin/env python3
"""fill16a.py DIR SECS THREADS [FIRST] [COUNT]: fill the learn store: THREADS threads, each as one of
the identities mFIRST..mFIRST+COUNT-1 in turn (report,route scope), send ReportUse by query (a new
query each time, three servers and a tool) over one kept-alive HTTPS connection for SECS s; prints
the statuses and the store's reports (classifierd_learn_reports_all) at the end."""
import os, sys, json, time, http.client, ssl, threading, collections, random, urllib.request
d, secs, nt = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 0; cnt = int(sys.argv[5]) if len(sys.argv) > 5 else 50
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['HTTP'].split(':'); S = ["github", "slack", "postgres", "sqlite", "filesystem", "memory", "fetch", "git"]
W = "deploy build query read write send fetch open close list create delete update merge branch issue table file page".split()
codes = collections.Counter(); lk = threading.Lock()
def conn():
    if 'CERT' in env:
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(h, int(p), timeout=30, context=c)
    return http.client.HTTPConnection(h, int(p), timeout=30)
def run(k):
    who = 'm%d' % (first + k % cnt); c = conn(); end = time.time() + secs; i = 0
    while time.time() < end:
        q = ' '.join(random.choice(W) for _ in range(6)) + ' %s %d' % (os.urandom(4).hex(), i); i += 1
        body = {'query': q, 'servers': random.sample(S, 3)}
        try:
            c.request('POST', '/classifier.v1.ClassifierService/ReportUse', json.dumps(body),
                      {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok[who]})
            r = c.getresponse(); r.read(); st = r.status
        except Exception as e:
            st = type(e).__name__; c = conn()
        with lk: codes[st] += 1
        if st == 429: time.sleep(0.05)
ts = [threading.Thread(target=run, args=(k,)) for k in range(nt)]
[t.start() for t in ts]; [t.join() for t in ts]
m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode()
print('fill16a:', dict(codes), [l for l in m.splitlines() if l.startswith('classifierd_learn_reports')])
