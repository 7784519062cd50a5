// mcph2_22.js DIR ADDRVAR WHO N SESSIONS (twenty-second pass): honest MCP sessions over HTTP/2 with Node's http2 module
// (TLS, certificate not verified) at https://$ADDRVAR/mcp (ADDRVAR: MCP or PROXY of DIR/env), one session (connection)
// for all: each MCP session initialize, initialized, its event stream GET open beside (closed by the client with
// RST_STREAM CANCEL at the end), tools/list, N tools/call of the first tool (ping when none), DELETE.
// Prints statuses, errors, GOAWAYs and the time taken.
const http2 = require('http2'), fs = require('fs');
const [dir, av, who, n, ns] = process.argv.slice(2);
const env = Object.fromEntries(fs.readFileSync(dir + '/env', 'utf8').split('\n').filter(l => l.includes('=')).map(l => l.split(/=(.*)/s).slice(0, 2)));
const tok = Object.fromEntries(fs.readFileSync(dir + '/tokens', 'utf8').split('\n').filter(Boolean).map(l => { const f = l.split(' '); return [f[0], f[2]]; }));
const s = http2.connect('https://' + env[av], { rejectUnauthorized: false });
const codes = {}, bump = k => { codes[k] = (codes[k] || 0) + 1; };
s.on('error', e => bump('session error ' + (e.code || e.message)));
s.on('goaway', c => bump('goaway ' + c));
s.on('close', () => bump('session closed'));
const H = { authorization: 'Bearer ' + tok[who], 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
function req(method, sid, body) {
  return new Promise(res => {
    let r; try { r = s.request({ ':method': method, ':path': '/mcp', ...H, ...(sid ? { 'mcp-session-id': sid } : {}) }); } catch (e) { bump('throw ' + e.code); res({}); return; }
    let st = 0, hs = {}, data = '';
    r.on('response', h => { st = h[':status']; hs = h; });
    r.on('data', d => { data += d; });
    r.on('end', () => res({ st, hs, data }));
    r.on('error', e => { bump('stream error ' + (e.code || e.message)); res({}); });
    r.end(body);
  });
}
const t0 = Date.now();
(async () => {
  for (let k = 0; k < +ns; k++) {
    const init = await req('POST', null, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'mcph2_22', version: '1' } } }));
    bump('initialize ' + init.st);
    const sid = init.hs && init.hs['mcp-session-id'];
    bump('initialized ' + (await req('POST', sid, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))).st);
    const g = s.request({ ':method': 'GET', ':path': '/mcp', ...H, accept: 'text/event-stream', 'mcp-session-id': sid });
    g.on('response', h => bump('GET ' + h[':status'])); g.on('data', () => {}); g.on('error', e => bump('GET error ' + (e.code || e.message))); g.end();
    const tl = await req('POST', sid, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    bump('tools/list ' + tl.st);
    let tools = []; try { const t = tl.data.includes('data:') ? tl.data.split('\n').filter(l => l.startsWith('data:')).pop().slice(5) : tl.data; tools = JSON.parse(t).result.tools; } catch (e) {}
    for (let i = 0; i < +n; i++) {
      const b = tools.length ? { jsonrpc: '2.0', id: 10 + i, method: 'tools/call', params: { name: tools[0].name, arguments: {} } } : { jsonrpc: '2.0', id: 10 + i, method: 'ping' };
      bump(b.method + ' ' + (await req('POST', sid, JSON.stringify(b))).st);
    }
    await new Promise(r => setTimeout(r, +(process.env.HOLDGET || 0))); // HOLDGET ms: the event stream kept open that long more
    g.close(http2.constants.NGHTTP2_CANCEL);
    bump('DELETE ' + (await req('DELETE', sid)).st);
  }
  console.log(`mcph2_22.js ${av} ${who} ${ns} x ${n}: ${JSON.stringify(codes)} in ${((Date.now() - t0) / 1000).toFixed(2)} s, load ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}`);
  s.close();
})();
