#!/usr/bin/env python3
"""sessflood: one identity opens sessions (initialize, never DELETE) on an
MCP listener until refused; prints how many, the status of the refusal,
RSS of PID before/after, then whether another identity still starts one.
usage: sessflood.py HOST:PORT PID TOKEN OTHER_TOKEN MAX"""
import sys, os, json, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); import mcp10
addr, pid, tk, other, mx = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rss = lambda: int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
print('before RSS', rss(), 'MB')
codes = collections.Counter(); ok = 0
for i in range(mx):
    s = mcp10.Session(addr, tk)
    codes[s.init[0]] += 1
    if s.init[0] != 200:
        last = s.init
print('sessions', dict(codes), 'RSS', rss(), 'MB', 'refusal', str(locals().get('last'))[:200])
o = mcp10.Session(addr, other); print('other identity initialize', o.init[0], 'tools/list', o.call('tools/list')[0])
