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
  call(method, request) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + this.deadlineMs);
      this.stub[method](request, { deadline }, (err, resp) => (err ? reject(err) : resolve(resp)));
    });
  }

  /** analyze_prompt: which categories a prompt needs; with sessionId, applies them to the session. */
  analyzePrompt({ prompt, context = '', validCategories = [], sessionId = '', mode = '' }) {
    return this.call('analyzePrompt', { prompt, context, validCategories, sessionId, mode });
  }

  /** Which servers and tools a query or conversation needs. */
  route({ query = '', messages = [], maxServers = 0, maxTools = 0, onNoMatch = 'NO_MATCH_POLICY_UNSPECIFIED' }) {
    return this.call('route', { query, messages, maxServers, maxTools, onNoMatch });
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
