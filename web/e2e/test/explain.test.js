// The explain page end to end: the real daemon (real model, default
// catalog) serving --http-listen, driven in Debian's headless Chromium by
// playwright-core. Writes a screenshot (var/explain.png unless EXPLAIN_SCREENSHOT).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..', '..');
const bin = process.env.CLASSIFIERD_BIN ?? path.join(root, 'bin', 'classifierd');
const genIndex = path.join(path.dirname(bin), 'gen-index');
const model = process.env.MODEL_DIR ?? path.join(root, '.cache', 'models', 'all-MiniLM-L6-v2-int8');
const ortLib = process.env.ORT_LIB ?? path.join(root, '.cache', 'onnxruntime-1.24.3', 'libonnxruntime.so.1');
const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
// make test writes under var/ (ignored); make explain-screenshot refreshes docs/explain.png.
const screenshot = process.env.EXPLAIN_SCREENSHOT ?? path.join(root, 'var', 'explain.png');

let daemon;
let browser;
let base;
let stderr = '';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

async function waitServing(url, deadline) {
  for (;;) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (daemon.exitCode !== null) throw new Error(`classifierd exited: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`classifierd not serving: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  // A missing browser fails the test (no skip): `make chromium` installs it.
  assert.ok(fs.existsSync(browserPath), `no Chromium at ${browserPath}: run make chromium (apt-get install chromium)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'classifierd-e2e-'));
  const index = path.join(dir, 'default.idx');
  execFileSync(genIndex, ['--catalog', path.join(root, 'data', 'catalogs', 'default.json'), '--model', model,
    '--out', index, '--ort-lib', ortLib]);
  const grpcAddr = `127.0.0.1:${await freePort()}`;
  const httpAddr = `127.0.0.1:${await freePort()}`;
  daemon = spawn(bin, ['--index', index, '--model', model, '--listen', grpcAddr, '--http-listen', httpAddr,
    '--ort-lib', ortLib]);
  daemon.stderr.on('data', (d) => { stderr += d; });
  base = `http://${httpAddr}`;
  await waitServing(`${base}/`, Date.now() + 60000);
  browser = await chromium.launch({ executablePath: browserPath, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  if (daemon && daemon.exitCode === null) {
    const exited = new Promise((r) => daemon.once('exit', r));
    daemon.kill('SIGTERM');
    await exited;
  }
});

test('explain page ranks the default catalog and shows evidence, tokens and reliability', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 1400 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${base}/`);
  await page.waitForSelector('#reliability svg.diagram');
  assert.match(await page.textContent('#index-info'), /17 categories, 19 servers, 139 tools/);

  await page.fill('#prompt', 'Check my GitHub notifications and open pull requests');
  await page.click('#explain');
  await page.waitForSelector('#categories tbody tr td.name');
  const cats = await page.$$eval('#categories tbody tr td.name', (tds) => tds.map((td) => td.textContent));
  assert.equal(cats[0], 'github', `ranked categories ${cats}`);
  const servers = await page.$$eval('#servers tbody tr td.name', (tds) => tds.map((td) => td.textContent));
  assert.equal(servers[0], 'github', `ranked servers ${servers}`);
  const tools = await page.$$eval('#tools tbody tr td.name', (tds) => tds.map((td) => td.textContent));
  assert.ok(tools.length > 0 && tools[0].startsWith('github/'), `ranked tools ${tools}`);

  // Confidence, the abstain-threshold mark, and the evidence kind.
  const conf = Number((await page.textContent('#categories tbody tr:first-child td.conf')).trim());
  assert.ok(conf > 0.5 && conf <= 1, `top confidence ${conf}`);
  assert.ok(await page.$('#categories tbody tr:first-child .bar i'), 'threshold mark');
  const kinds = async (table) => page.$$eval(`#${table} tbody tr:first-child .kind`, (ks) => ks.map((k) => k.textContent));
  assert.deepEqual(await kinds('categories'), ['lexical', 'dense'], 'github: its keyword and its nearest example');
  assert.ok((await kinds('tools')).includes('dense'), 'a tool shows its dense evidence');
  assert.match(await page.textContent('#tokens'), /^Tokens saved: \d+ of \d+/);
  const bins = await page.$$eval('#reliability svg.diagram rect.bin', (rs) => rs.length);
  assert.ok(bins > 0, 'reliability bins drawn');

  // A conversation pasted as turns routes too.
  await page.fill('#prompt', 'user: my container keeps crashing\nassistant: Which one?\nuser: the postgres docker container, show me its logs');
  await page.click('#explain');
  await page.waitForFunction(() => document.querySelector('#categories tbody tr td.name')?.textContent === 'docker');

  // A category pattern is evidence of its own kind.
  await page.fill('#prompt', 'PROJ-123 is blocked, can you look?');
  await page.click('#explain');
  await page.waitForFunction(() => document.querySelector('#categories tbody tr td.name')?.textContent === 'jira');
  assert.ok((await kinds('categories')).includes('pattern'), 'jira matched by pattern');

  await page.fill('#prompt', 'Check my GitHub notifications and open pull requests');
  await page.click('#explain');
  await page.waitForFunction(() => document.querySelector('#categories tbody tr td.name')?.textContent === 'github');
  fs.mkdirSync(path.dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: true });
  assert.deepEqual(errors, []);
});
