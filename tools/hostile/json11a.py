#!/usr/bin/env python3
"""json11a.py: JSON edge cases on --http-listen Route (Connect JSON and REST shape) and the daemon's
--mcp-listen route tool: invalid UTF-8, lone surrogates, duplicate keys, huge and odd numbers,
deep nesting under an unknown field, a BOM, NUL; prints each status and the answer's head (DIR/env)."""
import os, sys, json, http.client
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d = os.environ.get('DIR', 'var/h11')
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
cases = {
 'invalid utf8': b'{"query":"caf\xc3\x28 open a pr"}', 'lone surrogate': b'{"query":"\\ud800 open a pr"}',
 'duplicate key': b'{"query":"open a pr","query":"send slack"}', 'dup top_k': b'{"query":"open a pr","topK":1,"topK":50}',
 'huge number': b'{"query":"open a pr","topK":1' + b'0' * 400 + b'}', 'float topK': b'{"query":"open a pr","topK":1.5}',
 'exp topK': b'{"query":"open a pr","topK":1e2}', 'neg topK': b'{"query":"open a pr","topK":-1}',
 'deep unknown': b'{"query":"open a pr","zz":' + b'[' * 30000 + b']' * 30000 + b'}',
 'bom': b'\xef\xbb\xbf{"query":"open a pr"}', 'nul in query': b'{"query":"open\\u0000 a pr"}',
 'trailing junk': b'{"query":"open a pr"} {"query":"x"}', 'nan': b'{"query":"open a pr","minScore":NaN}',
}
h, p = env['HTTP'].split(':')
for name, body in cases.items():
    c = http.client.HTTPConnection(h, int(p), timeout=30)
    c.request('POST', '/classifier.v1.ClassifierService/Route', body, {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + tok['alice']})
    r = c.getresponse(); b = r.read(); print('%-16s %d %r' % (name, r.status, b[:110]))
s = mcp10.Session(env['MCP'], tok['alice'])
for name, raw in [('mcp invalid utf8', b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"route","arguments":{"query":"caf\xc3\x28"}}}'),
                  ('mcp dup id', b'{"jsonrpc":"2.0","id":5,"id":6,"method":"tools/call","params":{"name":"route","arguments":{"query":"pr"}}}'),
                  ('mcp dup name', b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"route","name":"call_tool","arguments":{"query":"pr"}}}'),
                  ('mcp huge id', b'{"jsonrpc":"2.0","id":1' + b'0' * 5000 + b',"method":"ping"}'),
                  ('mcp id object', b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}')]:
    st, r, _ = s.post(None, raw=raw); print('%-16s %d %s' % (name, st, json.dumps(r)[:140] if not isinstance(r, str) else r[:140]))
