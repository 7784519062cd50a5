import type { ChannelCredentials } from '@grpc/grpc-js';

export interface ScoredLabel { id: string; confidence: number; score: number; evidence: string; name: string }
export interface ScoredTool { name: string; server: string; confidence: number; score: number; category: string; evidence: string; serverName: string }
export interface ToolStats {
  totalTools: number; selectedTools: number; reductionPercent: number;
  originalCount: number; returnedCount: number; tokensTotal: number; tokensReturned: number;
}
export interface Message { role: 'user' | 'assistant' | 'system' | 'tool'; content: string }
export type NoMatchPolicy = 'NO_MATCH_POLICY_UNSPECIFIED' | 'NO_MATCH_POLICY_NONE' | 'NO_MATCH_POLICY_META' | 'NO_MATCH_POLICY_ALL';

export interface AnalyzePromptResponse {
  categories: string[]; confidence: number; reasoning: string;
  added: string[]; total: number; changed: boolean;
  warning: string; suggestion: string; nextStep: string; degraded: boolean;
  ignoredCategories: string[]; scores: ScoredLabel[];
}
export interface RouteResponse {
  servers: ScoredLabel[]; tools: ScoredTool[]; categories: ScoredLabel[]; reasoning: string;
  stats: ToolStats; abstained: boolean; appliedPolicy: NoMatchPolicy; policyReason: string;
}
export interface ExposureChange { timestamp: { seconds: number; nanos: number }; operation: string; added: string[]; removed: string[]; total: number }
export interface Session { id: string; exposedCategories: string[]; history: ExposureChange[] }
export interface Tool { name: string; server: string; category: string; description: string; inputSchemaJson: string; serverName: string }
export interface ListToolsResponse { tools: Tool[]; stats: ToolStats; exposedCategories: string[] }
export interface WatchExposureEvent { sessionId: string; change: ExposureChange; exposedCategories: string[] }
export interface UpdateExposureResponse { added: string[]; removed: string[]; total: number; changed: boolean; exposedCategories: string[] }

export class ClassifierClient {
  constructor(address: string, options?: { deadlineMs?: number; credentials?: ChannelCredentials });
  analyzePrompt(req: { prompt: string; context?: string; validCategories?: string[]; sessionId?: string; mode?: 'additive' | 'replacement' | '' }): Promise<AnalyzePromptResponse>;
  route(req: { query?: string; messages?: Message[]; maxServers?: number; maxTools?: number; onNoMatch?: NoMatchPolicy }, options?: { deadlineMs?: number }): Promise<RouteResponse>;
  createSession(req?: { sessionId?: string; defaultExposure?: 'zero' | 'meta-only' | 'minimal' | 'all' | '' }): Promise<{ session: Session }>;
  updateExposure(req: { sessionId: string; categories: string[]; mode?: 'additive' | 'replacement' | '' }): Promise<UpdateExposureResponse>;
  listTools(sessionId: string): Promise<ListToolsResponse>;
  deleteSession(sessionId: string): Promise<Record<string, never>>;
  getStats(): Promise<Record<string, unknown>>;
  watchExposure(sessionId: string, onEvent: (e: WatchExposureEvent) => void, onEnd?: (err: Error | null) => void): { cancel(): void };
  close(): void;
}

/** Smart-routing settings: ENABLE_SMART_ROUTING, SMART_ROUTING_MAX_TOOLS (30), SMART_ROUTING_MAX_SERVERS (4). */
export interface RoutingConfig { enabled: boolean; maxTools: number; maxServers: number }
export class ConfigError extends Error {}
export function configFromEnv(env?: Record<string, string | undefined>, overrides?: Partial<RoutingConfig>): RoutingConfig;
export function shouldRoute(tools: { server: string }[], config: RoutingConfig): boolean;

export interface AgentTool { name: string; server: string; [key: string]: unknown }
export interface FilterResult<T extends AgentTool> {
  tools: T[]; relevantServers: string[]; reasoning: string;
  routed: boolean; cached: boolean; fallback: boolean; error?: Error;
}
export class Router {
  constructor(client: ClassifierClient, config?: RoutingConfig, options?: { timeoutMs?: number; maxConversations?: number });
  filterTools<T extends AgentTool>(conversationId: string, conversation: Message[], tools: T[]): Promise<FilterResult<T>>;
  refresh(conversationId: string): void;
}
