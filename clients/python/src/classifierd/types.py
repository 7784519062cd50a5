"""Typed results of the classifierd API.

Each result is a frozen dataclass built from the daemon's protobuf answer;
field names follow the proto (proto/classifier/v1/classifier.proto,
proto/terminal/v1/terminal.proto), whose comments say what each means.
Timestamps are timezone-aware datetimes (UTC), or None when unset.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass

from google.protobuf import timestamp_pb2

from classifierd._gen.classifier.v1 import classifier_pb2 as pb
from classifierd._gen.terminal.v1 import terminal_pb2 as tpb

__all__ = [
    "AnalyzePromptResult",
    "ClassifyResult",
    "DetectedContext",
    "DetectContextsResult",
    "ExposureChange",
    "ExposureEvent",
    "IndexInfo",
    "InputEvent",
    "InputPrompt",
    "InputSuggestion",
    "Message",
    "NoMatchPolicy",
    "RouteResult",
    "ScoredLabel",
    "ScoredTool",
    "Session",
    "Stats",
    "Tool",
    "ToolList",
    "ToolStats",
    "ExposureUpdate",
]


def _time(ts: timestamp_pb2.Timestamp, present: bool) -> _dt.datetime | None:
    if not present:
        return None
    return ts.ToDatetime(tzinfo=_dt.timezone.utc)


class NoMatchPolicy(enum.IntEnum):
    """NoMatchPolicy says what route() returns when nothing fits."""

    UNSPECIFIED = pb.NO_MATCH_POLICY_UNSPECIFIED
    """The daemon's default (--on-no-match, NONE unless configured)."""
    NONE = pb.NO_MATCH_POLICY_NONE
    """No tools."""
    META = pb.NO_MATCH_POLICY_META
    """Only the meta category's tools."""
    ALL = pb.NO_MATCH_POLICY_ALL
    """Every tool (the smart-routing fallback)."""


@dataclass(frozen=True)
class Message:
    """Message is one conversation turn; role is user, assistant, system or tool."""

    role: str
    content: str

    def _pb(self) -> pb.Message:
        return pb.Message(role=self.role, content=self.content)


@dataclass(frozen=True)
class ScoredLabel:
    """ScoredLabel is a category or server with its calibrated confidence.

    name is a server's catalog name when it differs from id, else empty.
    """

    id: str
    confidence: float
    score: float
    evidence: str
    name: str

    @classmethod
    def _from_pb(cls, m: pb.ScoredLabel) -> ScoredLabel:
        return cls(id=m.id, confidence=m.confidence, score=m.score, evidence=m.evidence, name=m.name)


@dataclass(frozen=True)
class ScoredTool:
    """ScoredTool is a tool with its server and calibrated confidence."""

    name: str
    server: str
    confidence: float
    score: float
    category: str
    evidence: str
    server_name: str

    @classmethod
    def _from_pb(cls, m: pb.ScoredTool) -> ScoredTool:
        return cls(name=m.name, server=m.server, confidence=m.confidence, score=m.score,
                   category=m.category, evidence=m.evidence, server_name=m.server_name)


@dataclass(frozen=True)
class ToolStats:
    """ToolStats is the token accounting of a tool list (cl100k_base tokens)."""

    total_tools: int
    selected_tools: int
    reduction_percent: float
    original_count: int
    returned_count: int
    tokens_total: int
    tokens_returned: int

    @classmethod
    def _from_pb(cls, m: pb.ToolStats) -> ToolStats:
        return cls(total_tools=m.total_tools, selected_tools=m.selected_tools,
                   reduction_percent=m.reduction_percent, original_count=m.original_count,
                   returned_count=m.returned_count, tokens_total=m.tokens_total,
                   tokens_returned=m.tokens_returned)


@dataclass(frozen=True)
class ClassifyResult:
    """ClassifyResult lists a text's categories, best first."""

    categories: tuple[ScoredLabel, ...]
    abstained: bool
    reasoning: str

    @classmethod
    def _from_pb(cls, m: pb.ClassifyResponse) -> ClassifyResult:
        return cls(categories=tuple(ScoredLabel._from_pb(c) for c in m.categories),
                   abstained=m.abstained, reasoning=m.reasoning)


@dataclass(frozen=True)
class RouteResult:
    """RouteResult lists the servers and tools a query needs, best first.

    When abstained is true, applied_policy says which no-match policy
    produced tools and policy_reason why.
    """

    servers: tuple[ScoredLabel, ...]
    tools: tuple[ScoredTool, ...]
    categories: tuple[ScoredLabel, ...]
    reasoning: str
    stats: ToolStats
    abstained: bool
    applied_policy: NoMatchPolicy
    policy_reason: str

    @classmethod
    def _from_pb(cls, m: pb.RouteResponse) -> RouteResult:
        return cls(servers=tuple(ScoredLabel._from_pb(s) for s in m.servers),
                   tools=tuple(ScoredTool._from_pb(t) for t in m.tools),
                   categories=tuple(ScoredLabel._from_pb(c) for c in m.categories),
                   reasoning=m.reasoning, stats=ToolStats._from_pb(m.stats),
                   abstained=m.abstained, applied_policy=NoMatchPolicy(m.applied_policy),
                   policy_reason=m.policy_reason)


@dataclass(frozen=True)
class AnalyzePromptResult:
    """AnalyzePromptResult is the answer of a hub's analyze_prompt meta-tool.

    added, total and changed describe the session's exposure after the
    answer was applied (empty/zero without a session).
    """

    categories: tuple[str, ...]
    confidence: float
    reasoning: str
    added: tuple[str, ...]
    total: int
    changed: bool
    warning: str
    suggestion: str
    next_step: str
    degraded: bool
    ignored_categories: tuple[str, ...]
    scores: tuple[ScoredLabel, ...]

    @classmethod
    def _from_pb(cls, m: pb.AnalyzePromptResponse) -> AnalyzePromptResult:
        return cls(categories=tuple(m.categories), confidence=m.confidence, reasoning=m.reasoning,
                   added=tuple(m.added), total=m.total, changed=m.changed, warning=m.warning,
                   suggestion=m.suggestion, next_step=m.next_step, degraded=m.degraded,
                   ignored_categories=tuple(m.ignored_categories),
                   scores=tuple(ScoredLabel._from_pb(s) for s in m.scores))


@dataclass(frozen=True)
class DetectedContext:
    """DetectedContext is one context a message touches; evidence_kind is keyword, pattern or semantic."""

    id: str
    confidence: float
    evidence_kind: str
    evidence: str


@dataclass(frozen=True)
class DetectContextsResult:
    """DetectContextsResult lists contexts best first; reason is set when there is none."""

    contexts: tuple[DetectedContext, ...]
    reason: str

    @classmethod
    def _from_pb(cls, m: pb.DetectContextsResponse) -> DetectContextsResult:
        return cls(contexts=tuple(DetectedContext(id=c.id, confidence=c.confidence,
                                                  evidence_kind=c.evidence_kind, evidence=c.evidence)
                                  for c in m.contexts),
                   reason=m.reason)


@dataclass(frozen=True)
class ExposureChange:
    """ExposureChange is one change of a session's exposed categories.

    operation is create, additive or replacement; total counts the exposed
    categories after the change.
    """

    timestamp: _dt.datetime | None
    operation: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    total: int

    @classmethod
    def _from_pb(cls, m: pb.ExposureChange) -> ExposureChange:
        return cls(timestamp=_time(m.timestamp, m.HasField("timestamp")), operation=m.operation,
                   added=tuple(m.added), removed=tuple(m.removed), total=m.total)


@dataclass(frozen=True)
class Session:
    """Session is a hub client's tool-exposure state, with its history oldest first."""

    id: str
    exposed_categories: tuple[str, ...]
    history: tuple[ExposureChange, ...]
    created_at: _dt.datetime | None
    last_activity: _dt.datetime | None

    @classmethod
    def _from_pb(cls, m: pb.Session) -> Session:
        return cls(id=m.id, exposed_categories=tuple(m.exposed_categories),
                   history=tuple(ExposureChange._from_pb(h) for h in m.history),
                   created_at=_time(m.created_at, m.HasField("created_at")),
                   last_activity=_time(m.last_activity, m.HasField("last_activity")))


@dataclass(frozen=True)
class ExposureUpdate:
    """ExposureUpdate reports what update_exposure changed."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    total: int
    changed: bool
    exposed_categories: tuple[str, ...]

    @classmethod
    def _from_pb(cls, m: pb.UpdateExposureResponse) -> ExposureUpdate:
        return cls(added=tuple(m.added), removed=tuple(m.removed), total=m.total,
                   changed=m.changed, exposed_categories=tuple(m.exposed_categories))


@dataclass(frozen=True)
class Tool:
    """Tool is a tool definition as a hub hands it to an LLM (input_schema_json is JSON text)."""

    name: str
    server: str
    category: str
    description: str
    input_schema_json: str
    server_name: str

    @classmethod
    def _from_pb(cls, m: pb.Tool) -> Tool:
        return cls(name=m.name, server=m.server, category=m.category, description=m.description,
                   input_schema_json=m.input_schema_json, server_name=m.server_name)


@dataclass(frozen=True)
class ToolList:
    """ToolList is a session's filtered tools/list with its token accounting."""

    tools: tuple[Tool, ...]
    stats: ToolStats
    exposed_categories: tuple[str, ...]

    @classmethod
    def _from_pb(cls, m: pb.ListToolsResponse) -> ToolList:
        return cls(tools=tuple(Tool._from_pb(t) for t in m.tools), stats=ToolStats._from_pb(m.stats),
                   exposed_categories=tuple(m.exposed_categories))


@dataclass(frozen=True)
class ExposureEvent:
    """ExposureEvent is one actual change of a watched session's exposure.

    Relay it to the MCP client as notifications/tools/list_changed.
    """

    session_id: str
    change: ExposureChange
    exposed_categories: tuple[str, ...]

    @classmethod
    def _from_pb(cls, m: pb.WatchExposureResponse) -> ExposureEvent:
        return cls(session_id=m.session_id, change=ExposureChange._from_pb(m.change),
                   exposed_categories=tuple(m.exposed_categories))


@dataclass(frozen=True)
class Stats:
    """Stats are the daemon's cumulative counters since it started."""

    since: _dt.datetime | None
    requests_by_method: dict[str, int]
    tool_list_answers: int
    tokens_baseline: int
    tokens_returned: int
    reduction_percent: float
    degraded_answers: int
    abstained_answers: int
    active_sessions: int

    @classmethod
    def _from_pb(cls, m: pb.GetStatsResponse) -> Stats:
        return cls(since=_time(m.since, m.HasField("since")),
                   requests_by_method=dict(m.requests_by_method),
                   tool_list_answers=m.tool_list_answers, tokens_baseline=m.tokens_baseline,
                   tokens_returned=m.tokens_returned, reduction_percent=m.reduction_percent,
                   degraded_answers=m.degraded_answers, abstained_answers=m.abstained_answers,
                   active_sessions=m.active_sessions)


@dataclass(frozen=True)
class IndexInfo:
    """IndexInfo describes the model and index the daemon serves, and its input limits."""

    model_name: str
    dimensions: int
    model_fingerprint: str
    categories: int
    servers: int
    tools: int
    vectors: int
    built_at: _dt.datetime | None
    format_version: int
    catalog_sha256: str
    max_text_bytes: int
    max_batch: int
    max_messages: int

    @classmethod
    def _from_pb(cls, m: pb.GetIndexInfoResponse) -> IndexInfo:
        return cls(model_name=m.model_name, dimensions=m.dimensions,
                   model_fingerprint=m.model_fingerprint, categories=m.categories,
                   servers=m.servers, tools=m.tools, vectors=m.vectors,
                   built_at=_time(m.built_at, m.HasField("built_at")),
                   format_version=m.format_version, catalog_sha256=m.catalog_sha256,
                   max_text_bytes=m.limits.max_text_bytes, max_batch=m.limits.max_batch,
                   max_messages=m.limits.max_messages)


@dataclass(frozen=True)
class InputPrompt:
    """InputPrompt is a detected terminal input prompt (prompt_type: password, yes_no, choice, path, text, command, unknown)."""

    prompt_text: str
    confidence: float
    prompt_type: str
    matched_pattern: str
    file_position: int
    timestamp: _dt.datetime | None
    is_dangerous: bool
    danger_reason: str

    @classmethod
    def _from_pb(cls, m: tpb.InputPrompt) -> InputPrompt:
        return cls(prompt_text=m.prompt_text, confidence=m.confidence, prompt_type=m.prompt_type,
                   matched_pattern=m.matched_pattern, file_position=m.file_position,
                   timestamp=_time(m.timestamp, m.HasField("timestamp")),
                   is_dangerous=m.is_dangerous, danger_reason=m.danger_reason)


@dataclass(frozen=True)
class InputSuggestion:
    """InputSuggestion is one candidate answer to a terminal prompt."""

    input_text: str
    confidence: float
    source: str
    reasoning: str


@dataclass(frozen=True)
class InputEvent:
    """InputEvent is one recorded answer to a terminal prompt (secrets read "[REDACTED]")."""

    event_id: str
    session_id: str
    prompt_text: str
    input_text: str
    success: bool
    input_source: str
    response_time_ms: int
    timestamp: _dt.datetime | None
    prompt_type: str
    pattern_key: str

    @classmethod
    def _from_pb(cls, m: tpb.InputEvent) -> InputEvent:
        return cls(event_id=m.event_id, session_id=m.session_id, prompt_text=m.prompt_text,
                   input_text=m.input_text, success=m.success, input_source=m.input_source,
                   response_time_ms=m.response_time_ms,
                   timestamp=_time(m.timestamp, m.HasField("timestamp")),
                   prompt_type=m.prompt_type, pattern_key=m.pattern_key)
