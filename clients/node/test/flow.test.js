// The full hub flow against the real daemon and the real model.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { ClassifierClient, Router, configFromEnv } from '../index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..', '..');
const bin = process.env.CLASSIFIERD_BIN ?? path.join(root, 'bin', 'classifierd');
const genIndex = path.join(path.dirname(bin), 'gen-index');
const model = process.env.MODEL_DIR ?? path.resolve(root, '..', 'shared', 'models', 'use-lite-en');
const ortLib = process.env.ORT_LIB ?? path.join(root, '.cache', 'onnxruntime-1.24.3', 'libonnxruntime.so.1');

let daemon;
let client;
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

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'classifierd-node-'));
  const index = path.join(dir, 'default.idx');
  execFileSync(genIndex, ['--catalog', path.join(root, 'data', 'catalogs', 'default.json'), '--model', model, '--out', index, '--ort-lib', ortLib]);
  const addr = `127.0.0.1:${await freePort()}`;
  daemon = spawn(bin, ['--index', index, '--model', model, '--listen', addr, '--ort-lib', ortLib,
    '--terminal-logs', path.join(dir, 'terminal'), '--terminal-db', path.join(dir, 'terminal.db')]);
  daemon.stderr.on('data', (d) => { stderr += d; });
  client = new ClassifierClient(addr, { deadlineMs: 10000 });
  for (let i = 0; ; i++) {
    try {
      await client.analyzePrompt({ prompt: 'ping' });
      return;
    } catch (err) {
      if (i > 300 || daemon.exitCode !== null) throw new Error(`daemon not ready: ${err}\n${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
});

after(() => {
  client?.close();
  daemon?.kill('SIGTERM');
});

test('hub flow: meta-only session, analyze, change event, filtered tools, isolation', async () => {
  const { session: a } = await client.createSession({ defaultExposure: 'meta-only' });
  const { session: b } = await client.createSession({ defaultExposure: 'meta-only' });
  assert.deepEqual(a.exposedCategories, ['meta']);

  const before = await client.listTools(a.id);
  assert.ok(before.tools.length > 0);
  assert.ok(before.tools.every((t) => t.category === 'meta'), 'a new session sees only meta tools');

  const eventsA = [];
  const eventsB = [];
  const gotA = new Promise((resolve) => {
    const w = client.watchExposure(a.id, (e) => { eventsA.push(e); resolve(w); });
  });
  const wb = client.watchExposure(b.id, (e) => eventsB.push(e));
  await new Promise((r) => setTimeout(r, 200)); // let the watches register

  const res = await client.analyzePrompt({ prompt: 'Check my GitHub notifications', sessionId: a.id });
  assert.equal(res.categories[0], 'github');
  assert.ok(res.added.includes('github'));
  assert.equal(res.changed, true);

  const wa = await gotA;
  assert.equal(eventsA[0].sessionId, a.id);
  assert.ok(eventsA[0].change.added.includes('github'));

  const after = await client.listTools(a.id);
  assert.ok(after.tools.some((t) => t.server === 'github'), 'GitHub tools are listed after the analysis');
  assert.ok(after.stats.tokensReturned > before.stats.tokensReturned);
  assert.ok(after.stats.reductionPercent > 0);

  const other = await client.listTools(b.id);
  assert.deepEqual(other.exposedCategories, ['meta'], 'the second session stays isolated');
  assert.ok(other.tools.every((t) => t.category === 'meta'));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(eventsB.length, 0, 'the second session got no event');

  wa.cancel();
  wb.cancel();
});

test('route and stats', async () => {
  const r = await client.route({ query: 'Check my GitHub notifications' });
  assert.equal(r.servers[0].id, 'github');
  assert.ok(r.tools.length > 0 && r.stats.totalTools > r.stats.selectedTools);
  const none = await client.route({ query: 'bake me a lasagna', onNoMatch: 'NO_MATCH_POLICY_NONE' });
  assert.equal(none.abstained, true);
  assert.equal(none.tools.length, 0);
  assert.equal(none.appliedPolicy, 'NO_MATCH_POLICY_NONE');
  const s = await client.getStats();
  assert.ok(s.tokensBaseline > s.tokensReturned);
});

test('bad input is a clear error', async () => {
  await assert.rejects(client.analyzePrompt({ prompt: 'x', mode: 'merge' }), /INVALID_ARGUMENT|mode/);
  await assert.rejects(client.listTools('no-such-session'), (err) => err.code === 5);
});

test('router: the environment decides, the real daemon filters the catalog', async () => {
  const { session } = await client.createSession({ defaultExposure: 'all' });
  const { tools } = await client.listTools(session.id);
  await client.deleteSession(session.id);
  assert.ok(tools.length > 30 && new Set(tools.map((t) => t.server)).size > 4);
  const conv = [{ role: 'user', content: 'Check my GitHub notifications' }];

  const router = new Router(client, configFromEnv({}));
  const res = await router.filterTools('conv-1', conv, tools);
  assert.equal(res.routed, true);
  assert.equal(res.fallback, false);
  assert.equal(res.relevantServers[0], 'github');
  assert.ok(res.tools.length > 0 && res.tools.length < tools.length);
  assert.ok(res.tools.every((t) => res.relevantServers.includes(t.server)));
  const again = await router.filterTools('conv-1', [...conv, { role: 'user', content: 'thanks' }], tools);
  assert.equal(again.cached, true);
  assert.deepEqual(again.tools, res.tools);

  const off = new Router(client, configFromEnv({ ENABLE_SMART_ROUTING: 'false' }));
  const all = await off.filterTools('conv-2', conv, tools);
  assert.equal(all.routed, false);
  assert.equal(all.tools.length, tools.length);

  const nobody = new ClassifierClient(`127.0.0.1:${await freePort()}`);
  const fb = await new Router(nobody, configFromEnv({}), { timeoutMs: 1000 }).filterTools('c', conv, tools);
  nobody.close();
  assert.equal(fb.fallback, true);
  assert.ok(fb.error);
  assert.equal(fb.tools.length, tools.length);
});
