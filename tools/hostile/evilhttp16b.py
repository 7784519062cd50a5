#!/usr/bin/env python3
"""evilhttp16b.py PORT MODEFILE: a hostile MCP server over streamable HTTP (JSON answers, no SSE) on
127.0.0.1:PORT/mcp, for the proxy's or the daemon's HTTP backends. Its tools/call answer follows the
first line of MODEFILE:
  normal        pong
  big MB        an application/json answer of MB megabytes (a text content), streamed in 1 MB writes
  bigerr MB     the same body with HTTP status 500
  ssebig MB     a text/event-stream answer whose one event is MB megabytes
  ssemulti MB   a text/event-stream answer whose one event is MB data lines of 1 MB each (a "pong"
                result with a _meta of MB keys, one a line: valid JSON once the lines are joined)
Logs what it serves to MODEFILE.log."""
import json, sys, time, threading, uuid
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
PORT, MODEFILE = int(sys.argv[1]), sys.argv[2]
LOG = open(MODEFILE + '.log', 'a', buffering=1)
def mode():
    try: return open(MODEFILE).read().split('\n')[0].split()
    except OSError: return ['normal']
class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def js(self, obj, code=200, sid=None):
        b = json.dumps(obj).encode()
        self.send_response(code); self.send_header('Content-Type', 'application/json'); self.send_header('Content-Length', str(len(b)))
        if sid: self.send_header('Mcp-Session-Id', sid)
        self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        self.send_response(405); self.send_header('Content-Length', '0'); self.end_headers()
    def do_DELETE(self):
        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()
    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0)); msg = json.loads(self.rfile.read(n))
        meth, mid = msg.get('method'), msg.get('id')
        LOG.write('%s %s %d\n' % (time.strftime('%H:%M:%S'), meth, n))
        if meth == 'initialize':
            return self.js({'jsonrpc': '2.0', 'id': mid, 'result': {'protocolVersion': msg['params'].get('protocolVersion', '2025-06-18'),
                'capabilities': {'tools': {}}, 'serverInfo': {'name': 'evilhttp', 'version': '1'}}}, sid=uuid.uuid4().hex)
        if mid is None:
            self.send_response(202); self.send_header('Content-Length', '0'); self.end_headers(); return
        if meth == 'tools/list':
            return self.js({'jsonrpc': '2.0', 'id': mid, 'result': {'tools': [{'name': 'fetch', 'description': 'fetches a web page by url',
                'inputSchema': {'type': 'object', 'properties': {'url': {'type': 'string'}}}}]}})
        if meth == 'tools/call':
            m = mode()
            if m[0] in ('big', 'bigerr', 'ssebig'):
                mb = int(m[1]); head = ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' % json.dumps(mid)).encode(); tail = b'"}]}}'
                sse = m[0] == 'ssebig'
                if sse: head, tail = b'event: message\ndata: ' + head, tail + b'\n\n'
                self.send_response(500 if m[0] == 'bigerr' else 200)
                self.send_header('Content-Type', 'text/event-stream' if sse else 'application/json')
                self.send_header('Content-Length', str(len(head) + len(tail) + (mb << 20))); self.end_headers()
                try:
                    self.wfile.write(head); chunk = b'A' * (1 << 20)
                    for _ in range(mb): self.wfile.write(chunk)
                    self.wfile.write(tail)
                except OSError as e:
                    LOG.write('write ended: %s\n' % e)
                return
            if m[0] == 'ssemulti':
                mb = int(m[1]); self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.end_headers()
                try:
                    self.wfile.write(('event: message\ndata: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"pong"}],"_meta":{\n' % json.dumps(mid)).encode())
                    line = 'M' * ((1 << 20) - 40)
                    for k in range(mb):
                        self.wfile.write(('data: "k%d":"%s"%s\n' % (k, line, ',' if k < mb - 1 else '')).encode())
                    self.wfile.write(b'data: }}}\n\n'); self.wfile.flush()
                except OSError as e:
                    LOG.write('write ended: %s\n' % e)
                self.close_connection = True
                return
            return self.js({'jsonrpc': '2.0', 'id': mid, 'result': {'content': [{'type': 'text', 'text': 'pong'}]}})
        if meth == 'ping':
            return self.js({'jsonrpc': '2.0', 'id': mid, 'result': {}})
        return self.js({'jsonrpc': '2.0', 'id': mid, 'error': {'code': -32601, 'message': 'no such method'}})
ThreadingHTTPServer(('127.0.0.1', PORT), H).serve_forever()
