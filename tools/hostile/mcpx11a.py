#!/usr/bin/env python3
"""mcpx11a.py: MCP protocol abuse on the daemon's --mcp-listen and the proxy's (DIR/env, DIR/tokens):
another identity's Mcp-Session-Id (use, DELETE), batches, id reuse, unsolicited responses,
resources/prompts/logging/completion methods, cancellation of another's id; prints each status."""
import os, sys, json, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d = os.environ.get('DIR', 'var/h11')
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
def short(x): return json.dumps(x)[:160] if not isinstance(x, str) else x[:160]
for name, addr, owner, other in [('daemon', env['MCP'], 'alice', 'bob'), ('proxy', env['PROXY'], 'caller', 'ops')]:
    print('==', name)
    a = mcp10.Session(addr, tok[owner]); b = mcp10.Session(addr, tok[other])
    print('init', a.init[0], b.init[0], 'sid', bool(a.sid))
    if name == 'proxy':
        print('alice stores', short(a.tool('call_tool', {'server': 'memory', 'tool': 'create_entities', 'arguments': {'entities': [{'name': 'pin', 'entityType': 'x', 'observations': ['alice PIN 4921']}]}})[1]))
    # bob with alice's session id
    hb = dict(b.h); hb['Mcp-Session-Id'] = a.sid; b2 = mcp10.Session.__new__(mcp10.Session); b2.__dict__.update(b.__dict__); b2.h = hb
    st, r = b2.call('tools/list'); print('bob on alice sid tools/list', st, short(r))
    if name == 'proxy':
        st, r = b2.tool('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}}); print('bob on alice sid read_graph', st, short(r))
    # batch
    st, r, _ = a.post(None, raw=json.dumps([{'jsonrpc': '2.0', 'id': 900 + i, 'method': 'tools/list'} for i in range(3)]))
    print('batch of 3', st, short(r))
    # unsolicited response and id reuse
    st, r, _ = a.post({'jsonrpc': '2.0', 'id': 12345, 'result': {'x': 1}}); print('unsolicited response', st, short(r))
    for m in ['resources/list', 'resources/templates/list', 'prompts/list', 'logging/setLevel', 'completion/complete', 'resources/subscribe', 'sampling/createMessage', 'roots/list', 'ping']:
        st, r = a.call(m, {'level': 'debug'} if m == 'logging/setLevel' else {}); print(m, st, short(r))
    st, r, _ = a.post({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': 1, 'reason': 'x'}}); print('cancel', st, short(r))
    res = []
    def same_id():
        res.append(a.post({'jsonrpc': '2.0', 'id': 7, 'method': 'tools/call', 'params': {'name': 'search_tools' if name == 'proxy' else 'route', 'arguments': {'query': 'open a pull request'}}})[0])
    ts = [threading.Thread(target=same_id) for _ in range(8)]; [t.start() for t in ts]; [t.join() for t in ts]; print('8 concurrent id 7', res)
    # bob deletes alice's session
    import http.client
    h, p = addr.split(':'); c = http.client.HTTPConnection(h, int(p)); c.request('DELETE', '/mcp', headers=hb); r = c.getresponse(); print('bob DELETE alice sid', r.status, r.read()[:100])
    st, r = a.call('tools/list'); print('alice after', st, short(r)[:80])
