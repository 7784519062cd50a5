// Smart-routing settings from the environment (the same variables as the Go and Python clients).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configFromEnv, shouldRoute, ConfigError } from '../index.js';

test('configFromEnv: defaults, values and overrides', () => {
  const cases = [
    [{}, {}, { enabled: true, maxTools: 30, maxServers: 4 }],
    [{ ENABLE_SMART_ROUTING: 'false' }, {}, { enabled: false, maxTools: 30, maxServers: 4 }],
    [{ ENABLE_SMART_ROUTING: '0', SMART_ROUTING_MAX_TOOLS: '50' }, {}, { enabled: false, maxTools: 50, maxServers: 4 }],
    [{ ENABLE_SMART_ROUTING: ' TRUE ', SMART_ROUTING_MAX_SERVERS: '2' }, {}, { enabled: true, maxTools: 30, maxServers: 2 }],
    [{ ENABLE_SMART_ROUTING: '', SMART_ROUTING_MAX_TOOLS: '' }, {}, { enabled: true, maxTools: 30, maxServers: 4 }],
    [{ ENABLE_SMART_ROUTING: 'off', SMART_ROUTING_MAX_TOOLS: '50' }, { enabled: true, maxTools: 10, maxServers: 1 }, { enabled: true, maxTools: 10, maxServers: 1 }],
  ];
  for (const [env, overrides, want] of cases) {
    assert.deepEqual(configFromEnv(env, overrides), want, JSON.stringify(env));
  }
});

test('configFromEnv reads process.env by default', () => {
  const saved = { ...process.env };
  try {
    process.env.ENABLE_SMART_ROUTING = 'no';
    process.env.SMART_ROUTING_MAX_SERVERS = '7';
    delete process.env.SMART_ROUTING_MAX_TOOLS;
    assert.deepEqual(configFromEnv(), { enabled: false, maxTools: 30, maxServers: 7 });
  } finally {
    process.env = saved;
  }
});

test('configFromEnv rejects bad values, naming the variable', () => {
  const cases = [
    [{ ENABLE_SMART_ROUTING: 'maybe' }, {}, /ENABLE_SMART_ROUTING/],
    [{ SMART_ROUTING_MAX_TOOLS: 'many' }, {}, /SMART_ROUTING_MAX_TOOLS/],
    [{ SMART_ROUTING_MAX_TOOLS: '0' }, {}, /SMART_ROUTING_MAX_TOOLS/],
    [{ SMART_ROUTING_MAX_SERVERS: '-1' }, {}, /SMART_ROUTING_MAX_SERVERS/],
    [{ SMART_ROUTING_MAX_SERVERS: '2.5' }, {}, /SMART_ROUTING_MAX_SERVERS/],
    [{}, { maxTools: 0 }, /maxTools/],
  ];
  for (const [env, overrides, re] of cases) {
    assert.throws(() => configFromEnv(env, overrides), (err) => err instanceof ConfigError && re.test(err.message), JSON.stringify(env));
  }
});

test('shouldRoute: more tools than maxTools on more servers than maxServers', () => {
  const tools = (servers, per) => Array.from({ length: servers * per }, (_, i) => ({ name: `t${i % per}`, server: `s${Math.floor(i / per)}` }));
  const cfg = configFromEnv({});
  assert.equal(shouldRoute(tools(6, 5), cfg), false); // 30 tools: not more than 30
  assert.equal(shouldRoute(tools(4, 10), cfg), false); // 4 servers: not more than 4
  assert.equal(shouldRoute(tools(5, 7), cfg), true);
  assert.equal(shouldRoute(tools(5, 7), configFromEnv({ ENABLE_SMART_ROUTING: 'false' })), false);
});
