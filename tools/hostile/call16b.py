#!/usr/bin/env python3
"""call16b.py DIR WHO TOOL ARGSJSON [N]: one session of WHO on the proxy calls TOOL (e.g. call_tool) with
ARGSJSON N times (default 1), printing status, answer size, the first 300 bytes, the time and the
proxy's RSS/CPU."""
import os, sys, json, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, who, tool, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]); n = int(sys.argv[5]) if len(sys.argv) > 5 else 1
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return 'RSS %d MB (peak %d) cpu %.2fs' % (s['VmRSS'], s['VmHWM'], (int(f[11]) + int(f[12])) / 100)
s = mcp10.Session(env['PROXY'], tok[who], timeout=120)
print('before', st())
for i in range(n):
    t = time.time(); c = s.post({'jsonrpc': '2.0', 'id': next(s.ids), 'method': 'tools/call', 'params': {'name': tool, 'arguments': args}})
    b = json.dumps(c[1])
    print(c[0], len(b), 'bytes in %.2fs' % (time.time() - t), b[:300], st(), flush=True)
