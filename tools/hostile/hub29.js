// hub29.js (twenty-ninth pass): hub22.js printing the first body of each kind of 429 it gets. hub22.js DIR N CONC [RECONNECT] (twenty-second pass): an honest hub over HTTP/2 (Node http2 module, TLS,
const seen429 = {};
// --http-listen): N small Route calls of one identity (WHO, default alice) with CONC in flight on one
// session; a call refused 429 is retried after its Retry-After (at most 5 tries). With RECONNECT=1 a
// session that got GOAWAY or closed is replaced by a new one (what a careful client does); without, the
// calls after it fail as Node fails them. VARY=1: every query differs (the model runs for each). Prints statuses, errors, GOAWAYs, sessions and the time taken.
const http2 = require('http2'), fs = require('fs');
const [dir, n, conc, reconnect] = process.argv.slice(2);
const env = Object.fromEntries(fs.readFileSync(dir + '/env', 'utf8').split('\n').filter(l => l.includes('=')).map(l => l.split(/=(.*)/s).slice(0, 2)));
const tok = Object.fromEntries(fs.readFileSync(dir + '/tokens', 'utf8').split('\n').filter(Boolean).map(l => { const f = l.split(' '); return [f[0], f[2]]; }));
const who = process.env.WHO || 'alice';
let s, sessions = 0, goaways = 0; const codes = {};
function session() {
  if (s && !s.closed && !s.destroyed && !s._gone) return s;
  s = http2.connect('https://' + env.HTTP, { rejectUnauthorized: false }); sessions++;
  const me = s;
  me.on('error', e => { codes['session:' + (e.code || e.message)] = (codes['session:' + (e.code || e.message)] || 0) + 1; });
  me.on('goaway', () => { goaways++; if (reconnect === '1') me._gone = true; });
  return s;
}
let seq = 0; // VARY=1: each call's query differs (no cached embedding: the model runs)
const body = () => JSON.stringify({ query: process.env.VARY === '1' ? 'open a pull request on github number ' + (seq++) + ' ' + Math.random().toString(36).slice(2) : 'open a pull request on github' });
function once() {
  return new Promise(res => {
    let r;
    try {
      r = session().request({ ':method': 'POST', ':path': '/classifier.v1.ClassifierService/Route', 'content-type': 'application/json', authorization: 'Bearer ' + tok[who] });
    } catch (e) { res({ st: e.code || e.message }); return; }
    let st = 0, ra = 0;
    r.on('response', h => { st = h[':status']; ra = +(h['retry-after'] || 0); });
    let bd = ''; r.on('data', c => { bd += c; });
    r.on('end', () => { if (st == 429 && !seen429[bd.slice(0,90)]) { seen429[bd.slice(0,90)] = 1; console.log('429:', bd.slice(0, 200)); } res({ st, ra }); });
    r.on('error', e => res({ st: e.code === 'ERR_HTTP2_STREAM_ERROR' ? e.message.replace('Stream closed with error code ', '') : (e.code || e.message) }));
    r.end(body());
  });
}
async function call() {
  for (let k = 0; k < 5; k++) {
    const { st, ra } = await once();
    codes[st] = (codes[st] || 0) + 1;
    if (st != 429) return;
    await new Promise(r => setTimeout(r, 1000 * (ra || 1) * Math.random()));
  }
}
const t0 = Date.now(); let i = 0;
(async () => {
  await Promise.all(Array.from({ length: +conc }, async () => { while (i++ < +n) await call(); }));
  console.log(`hub22 ${who} n ${n} conc ${conc} reconnect ${reconnect || 0}: ${JSON.stringify(codes)} goaways ${goaways} sessions ${sessions} in ${((Date.now() - t0) / 1000).toFixed(2)} s, load ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}`);
  s.close();
})();
