// @ts-check
// A small typed wrapper over @grpc/grpc-js for classifierd, for MCP hubs.
// The API is loaded at run time from proto/classifier/v1/classifier.proto
// (ClassifierService; terminal.v1.TerminalService is not wrapped here).
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Finds classifier.proto: next to the package (published) or in the repository. */
function protoRoot() {
  for (const dir of [path.join(here, 'proto'), path.join(here, '..', '..', 'proto')]) {
    if (fs.existsSync(path.join(dir, 'classifier', 'v1', 'classifier.proto'))) return dir;
  }
  throw new Error('classifier.proto not found next to the package or in ../../proto');
}

const definition = protoLoader.loadSync('classifier/v1/classifier.proto', {
  includeDirs: [protoRoot()],
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const pkg = /** @type {any} */ (grpc.loadPackageDefinition(definition)).classifier.v1;

/**
 * Client for classifier.v1.ClassifierService.
 */
export class ClassifierClient {
  /**
   * @param {string} address host:port of classifierd
   * @param {{deadlineMs?: number, credentials?: grpc.ChannelCredentials}} [options]
   */
  constructor(address, options = {}) {
    this.deadlineMs = options.deadlineMs ?? 5000;
    this.stub = new pkg.ClassifierService(address, options.credentials ?? grpc.credentials.createInsecure());
  }

  /** @private */
  call(method, request, deadlineMs = this.deadlineMs) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + deadlineMs);
      this.stub[method](request, { deadline }, (err, resp) => (err ? reject(err) : resolve(resp)));
    });
  }

  /** analyze_prompt: which categories a prompt needs; with sessionId, applies them to the session. */
  analyzePrompt({ prompt, context = '', validCategories = [], sessionId = '', mode = '' }) {
    return this.call('analyzePrompt', { prompt, context, validCategories, sessionId, mode });
  }

  /** Which servers and tools a query or conversation needs; options.deadlineMs overrides the client's. */
  route({ query = '', messages = [], maxServers = 0, maxTools = 0, onNoMatch = 'NO_MATCH_POLICY_UNSPECIFIED' }, options = {}) {
    return this.call('route', { query, messages, maxServers, maxTools, onNoMatch }, options.deadlineMs);
  }

  /** Starts a session; defaultExposure is zero, meta-only, minimal or all. */
  createSession({ sessionId = '', defaultExposure = '' } = {}) {
    return this.call('createSession', { sessionId, defaultExposure });
  }

  /** Adds (additive) or replaces (replacement) a session's exposed categories. */
  updateExposure({ sessionId, categories, mode = '' }) {
    return this.call('updateExposure', { sessionId, categories, mode });
  }

  /** The filtered tools/list of a session. */
  listTools(sessionId) {
    return this.call('listTools', { sessionId });
  }

  /** Deletes a session. */
  deleteSession(sessionId) {
    return this.call('deleteSession', { sessionId });
  }

  /** Cumulative counters: requests, token savings. */
  getStats() {
    return this.call('getStats', {});
  }

  /**
   * Streams one event per actual change of a session's exposure: relay each
   * as MCP notifications/tools/list_changed. Returns {cancel}.
   * @param {string} sessionId
   * @param {(event: any) => void} onEvent
   * @param {(err: Error) => void} [onEnd] called once when the stream ends (cancel ends it quietly)
   */
  watchExposure(sessionId, onEvent, onEnd) {
    const stream = this.stub.watchExposure({ sessionId });
    let cancelled = false;
    let ended = false;
    const end = (err) => {
      if (ended) return;
      ended = true;
      if (onEnd && !cancelled) onEnd(err);
    };
    stream.on('data', onEvent);
    stream.on('error', (err) => end(err));
    stream.on('end', () => end(null));
    return {
      cancel() {
        cancelled = true;
        stream.cancel();
      },
    };
  }

  /** Closes the channel. */
  close() {
    this.stub.close();
  }
}

/** A smart-routing environment variable or option has an invalid value; the message names it. */
export class ConfigError extends Error {}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off']);

function positive(name, value, from) {
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigError(`${name}=${JSON.stringify(from)}: want a positive integer`);
  }
  return value;
}

/**
 * The smart-routing settings agents use today, from the same environment
 * variables as the Go (client.ConfigFromEnv) and Python
 * (RoutingConfig.from_env) clients: ENABLE_SMART_ROUTING (true by default;
 * 1/0, yes/no, on/off also work), SMART_ROUTING_MAX_TOOLS (route only with
 * more tools than this, default 30) and SMART_ROUTING_MAX_SERVERS (... and
 * more servers than this, default 4). An unset or empty variable takes its
 * default; overrides win over the environment; a bad value throws ConfigError.
 * @param {Record<string, string | undefined>} [env]
 * @param {{enabled?: boolean, maxTools?: number, maxServers?: number}} [overrides]
 * @returns {{enabled: boolean, maxTools: number, maxServers: number}}
 */
export function configFromEnv(env = process.env, overrides = {}) {
  const get = (name) => (env[name] ?? '').trim();
  let enabled = true;
  const raw = get('ENABLE_SMART_ROUTING');
  if (raw !== '') {
    if (TRUE.has(raw.toLowerCase())) enabled = true;
    else if (FALSE.has(raw.toLowerCase())) enabled = false;
    else throw new ConfigError(`ENABLE_SMART_ROUTING=${JSON.stringify(raw)}: want true or false`);
  }
  const count = (name, def) => {
    const v = get(name);
    if (v === '') return def;
    return positive(name, /^[0-9]+$/.test(v) ? Number(v) : NaN, v);
  };
  const cfg = {
    enabled,
    maxTools: count('SMART_ROUTING_MAX_TOOLS', 30),
    maxServers: count('SMART_ROUTING_MAX_SERVERS', 4),
  };
  if (overrides.enabled !== undefined) cfg.enabled = Boolean(overrides.enabled);
  if (overrides.maxTools !== undefined) cfg.maxTools = positive('maxTools', overrides.maxTools, overrides.maxTools);
  if (overrides.maxServers !== undefined) cfg.maxServers = positive('maxServers', overrides.maxServers, overrides.maxServers);
  return cfg;
}

/**
 * Whether an agent with these tools routes: enabled, and more than maxTools
 * tools on more than maxServers servers.
 * @param {{server: string}[]} tools
 * @param {{enabled: boolean, maxTools: number, maxServers: number}} config
 */
export function shouldRoute(tools, config) {
  return config.enabled && tools.length > config.maxTools && new Set(tools.map((t) => t.server)).size > config.maxServers;
}

/**
 * Filters an agent's tools through classifierd, like the Go client's Router:
 * once per conversation (the whole conversation is sent), reused on later
 * turns until refresh(); on any error or timeout, every tool with
 * fallback: true, so routing never breaks a turn.
 */
export class Router {
  /**
   * @param {ClassifierClient} client
   * @param {{enabled: boolean, maxTools: number, maxServers: number}} [config] default configFromEnv()
   * @param {{timeoutMs?: number, maxConversations?: number}} [options]
   */
  constructor(client, config = configFromEnv(), options = {}) {
    this.client = client;
    this.config = config;
    this.timeoutMs = options.timeoutMs ?? 2000;
    this.maxConversations = options.maxConversations ?? 1000;
    /** @type {Map<string, {servers: string[], tools: Set<string> | null, reasoning: string}>} */
    this.cache = new Map();
  }

  /**
   * @param {string} conversationId
   * @param {{role: string, content: string}[]} conversation oldest first
   * @param {{name: string, server: string}[]} tools
   */
  async filterTools(conversationId, conversation, tools) {
    if (!shouldRoute(tools, this.config)) return { tools, relevantServers: [], reasoning: '', routed: false, cached: false, fallback: false };
    const hit = this.cache.get(conversationId);
    if (hit) return apply(hit, tools, true);
    if (conversation.length === 0) throw new Error('conversation has no message');
    let res;
    try {
      res = await this.client.route({ messages: conversation, onNoMatch: 'NO_MATCH_POLICY_ALL' }, { deadlineMs: this.timeoutMs });
    } catch (err) {
      return { tools, relevantServers: [], reasoning: '', routed: true, cached: false, fallback: true, error: err };
    }
    const answer = res.abstained
      ? { servers: [], tools: null, reasoning: res.reasoning }
      : { servers: res.servers.map((s) => s.id), tools: new Set(res.tools.map((t) => `${t.server}/${t.name}`)), reasoning: res.reasoning };
    this.cache.set(conversationId, answer);
    while (this.cache.size > this.maxConversations) this.cache.delete(this.cache.keys().next().value);
    return apply(answer, tools, false);
  }

  /** Forgets a conversation's answer, so its next turn routes again. */
  refresh(conversationId) {
    this.cache.delete(conversationId);
  }
}

function apply(answer, tools, cached) {
  const base = { relevantServers: answer.servers, reasoning: answer.reasoning, routed: true, cached, fallback: false };
  if (answer.tools === null) return { tools, ...base };
  const kept = tools.filter((t) => answer.tools.has(`${t.server}/${t.name}`));
  const matched = new Set(kept.map((t) => t.server));
  // A relevant server whose tools the daemon does not know by name keeps all of them.
  for (const t of tools) if (answer.servers.includes(t.server) && !matched.has(t.server)) kept.push(t);
  return { tools: kept, ...base };
}
