#!/usr/bin/env python3
"""rep17a.py DIR WHO CONNS SECS SIZE [METHOD]: CONNS threads, each on a kept-alive --http-listen connection
(HTTPS when DIR/env has CERT=, ALPN http/1.1), sending as fast as answered ReportUse by query (a SIZE-byte
query of fresh words each time, servers [github]) as WHO for SECS s; METHOD Route sends the same query as a
Route instead (the comparison). Prints statuses with the first message of each, calls/s, this client's CPU
and the daemon's in the window. ReportUse embeds and scores its query (a Route of it) before the identity's
--learn-report-rate is checked."""
import os, sys, json, time, http.client, ssl, threading, collections, resource, random
d, who, conns, secs, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
method = sys.argv[6] if len(sys.argv) > 6 else 'ReportUse'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PID']; h, p = env['HTTP'].split(':')
def cpu(): f = open(f'/proc/{pid}/stat').read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def conn():
    if 'CERT' in env:
        c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE; c.set_alpn_protocols(['http/1.1'])
        return http.client.HTTPSConnection(h, int(p), timeout=120, context=c)
    return http.client.HTTPConnection(h, int(p), timeout=120)
codes = collections.Counter(); first = {}; lk = threading.Lock()
hdr = {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok[who]}
def query():
    w = '%08x' % random.getrandbits(32)
    return ((w + ' create a github issue about ') * (size // 36 + 1))[:size]
def run(end):
    c = conn()
    while time.time() < end:
        b = {'query': query()}
        if method == 'ReportUse': b['servers'] = ['github']
        try:
            c.request('POST', '/classifier.v1.ClassifierService/' + method, json.dumps(b), hdr)
            r = c.getresponse(); body = r.read()
            with lk:
                codes[r.status] += 1
                if r.status not in first: first[r.status] = body[:160].decode(errors='replace')
            if (r.getheader('Connection') or '').lower() == 'close': c.close(); c = conn()
        except Exception as e:
            with lk: codes[type(e).__name__] += 1
            c.close(); c = conn()
c0, r0, t0 = cpu(), resource.getrusage(resource.RUSAGE_SELF), time.time()
ts = [threading.Thread(target=run, args=(t0 + secs,)) for _ in range(conns)]; [t.start() for t in ts]; [t.join() for t in ts]
r1, el = resource.getrusage(resource.RUSAGE_SELF), time.time() - t0
n = sum(v for k, v in codes.items() if isinstance(k, int))
print('rep17a %s %s x%d %d bytes: %s (%.1f/s); first %s; client %.1fs CPU, daemon %.1fs in %.0fs (%.1f ms a call)' % (
    who, method, conns, size, dict(codes), n / el, first, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, cpu() - c0, el,
    1000 * (cpu() - c0) / max(n, 1)))
