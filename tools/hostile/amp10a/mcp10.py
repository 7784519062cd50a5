"""mcp10: a minimal streamable-HTTP MCP client for the tenth pass's probes
(one session, JSON or SSE answers)."""
import http.client, json, itertools
class Session:
    def __init__(self, addr, token, version='2025-06-18', timeout=60):
        self.host, self.port = addr.split(':'); self.token = token; self.timeout = timeout
        self.ids = itertools.count(1); self.sid = None; self.version = version
        self.h = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
        if token: self.h['Authorization'] = 'Bearer ' + token
        st, r, hd = self.post({'jsonrpc': '2.0', 'id': next(self.ids), 'method': 'initialize', 'params': {
            'protocolVersion': version, 'capabilities': {'sampling': {}, 'elicitation': {}, 'roots': {'listChanged': True}}, 'clientInfo': {'name': 'p10', 'version': '0'}}})
        self.init = (st, r)
        self.sid = hd.get('Mcp-Session-Id')
        if self.sid:
            self.h['Mcp-Session-Id'] = self.sid; self.h['MCP-Protocol-Version'] = version
            self.post({'jsonrpc': '2.0', 'method': 'notifications/initialized'})
    def post(self, msg, raw=None):
        c = http.client.HTTPConnection(self.host, int(self.port), timeout=self.timeout)
        c.request('POST', '/mcp', raw if raw is not None else json.dumps(msg), self.h)
        r = c.getresponse(); body = r.read(); hd = dict(r.getheaders()); c.close()
        return r.status, parse(body), hd
    def call(self, method, params=None):
        st, r, _ = self.post({'jsonrpc': '2.0', 'id': next(self.ids), 'method': method, 'params': params or {}})
        return st, r
    def tool(self, name, args):
        return self.call('tools/call', {'name': name, 'arguments': args})
def parse(body):
    t = body.decode('utf-8', 'replace')
    out = []
    for line in t.splitlines():
        if line.startswith('data: '):
            try: out.append(json.loads(line[6:]))
            except Exception: out.append(line[6:])
    if out: return out[-1] if len(out) == 1 else out
    try: return json.loads(t)
    except Exception: return t
