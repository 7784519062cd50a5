// nodeh2_21.js DIR MODE [N] [S] (twenty-first pass): Node's http2 module as an honest client of --http-listen over TLS.
//   stream N S : one Route whose JSON body is written in N pieces of S bytes (a write each, after the last one's callback)
//   many N     : N small Route calls on one session, 8 at a time
//   idle N     : one session kept open N seconds, a Route every second, with a PING every second (session.ping)
// Prints statuses, errors and the time taken.
const http2 = require('http2'), fs = require('fs');
const [dir, mode, a, b] = process.argv.slice(2);
const env = Object.fromEntries(fs.readFileSync(dir + '/env', 'utf8').split('\n').filter(l => l.includes('=')).map(l => l.split(/=(.*)/s).slice(0, 2)));
const tok = Object.fromEntries(fs.readFileSync(dir + '/tokens', 'utf8').split('\n').filter(Boolean).map(l => { const f = l.split(' '); return [f[0], f[2]]; }));
const who = process.env.WHO || 'alice';
const s = http2.connect('https://' + env.HTTP, { rejectUnauthorized: false });
let errors = 0, codes = {};
s.on('error', e => { console.log('session error', e.code || e.message); errors++; });
s.on('goaway', (c) => console.log('goaway', c));
const t0 = Date.now();
function call(body, pieces) {
  return new Promise(res => {
    const r = s.request({ ':method': 'POST', ':path': '/classifier.v1.ClassifierService/Route', 'content-type': 'application/json', authorization: 'Bearer ' + tok[who] });
    let st = 0, data = '';
    r.on('response', h => { st = h[':status']; });
    r.on('data', d => { data += d; });
    r.on('end', () => { codes[st] = (codes[st] || 0) + 1; if (st != 200) console.log('status', st, data.slice(0, 120)); res(); });
    r.on('error', e => { codes[e.code] = (codes[e.code] || 0) + 1; res(); });
    if (!pieces) { r.end(body); return; }
    let k = 0;
    const next = () => { if (k >= pieces.length) { r.end(); return; } r.write(pieces[k++], next); };
    next();
  });
}
const small = JSON.stringify({ query: 'open a pull request on github' });
(async () => {
  if (mode === 'stream') {
    const N = +a, S = +b;
    const body = JSON.stringify({ query: 'open a pull request on github '.repeat(Math.ceil(N * S / 30)).slice(0, N * S - 13) });
    const pieces = []; for (let k = 0; k < body.length; k += S) pieces.push(body.slice(k, k + S));
    await call(null, pieces);
  } else if (mode === 'many') {
    const N = +a; let i = 0;
    await Promise.all(Array.from({ length: 8 }, async () => { while (i++ < N) await call(small); }));
  } else if (mode === 'idle') {
    for (let k = 0; k < +a; k++) { s.ping(() => {}); await call(small); await new Promise(r => setTimeout(r, 1000)); }
  }
  console.log(`node ${mode}: ${JSON.stringify(codes)} errors ${errors} in ${((Date.now() - t0) / 1000).toFixed(2)} s`);
  s.close();
})();
