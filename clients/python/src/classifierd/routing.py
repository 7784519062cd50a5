"""Smart routing for agents, configured the way agents are today.

An agent with many tools asks classifierd which of them a conversation
needs and shows the model only those; with few tools every tool fits in the
prompt anyway. Three environment variables, shared with the Go
(``client.ConfigFromEnv``) and Node.js (``configFromEnv``) clients, say when:

- ``ENABLE_SMART_ROUTING``: true (default) or false (also 1/0, yes/no, on/off);
- ``SMART_ROUTING_MAX_TOOLS``: route only with more tools than this (default 30);
- ``SMART_ROUTING_MAX_SERVERS``: ... and more servers than this (default 4).

Keyword arguments of RoutingConfig.from_env override them; an invalid value
raises ConfigError naming the variable.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from classifierd.client import Client
from classifierd.errors import ClassifierdError, ConfigError
from classifierd.types import Message, NoMatchPolicy

__all__ = ["AgentTool", "FilterResult", "Router", "RoutingConfig"]

ENV_ENABLE = "ENABLE_SMART_ROUTING"
ENV_MAX_TOOLS = "SMART_ROUTING_MAX_TOOLS"
ENV_MAX_SERVERS = "SMART_ROUTING_MAX_SERVERS"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(f"{name}={env[name]!r}: want true or false")


def _env_count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        n = int(raw, 10)
    except ValueError:
        raise ConfigError(f"{name}={env[name]!r}: want a positive integer") from None
    if n < 1:
        raise ConfigError(f"{name}={env[name]!r}: want a positive integer")
    return n


@dataclass(frozen=True)
class RoutingConfig:
    """RoutingConfig says when an agent routes its tools through classifierd.

    Attributes:
        enabled: route at all (ENABLE_SMART_ROUTING).
        max_tools: route only when the agent has more tools than this (SMART_ROUTING_MAX_TOOLS).
        max_servers: ... and more servers than this (SMART_ROUTING_MAX_SERVERS).
        timeout: bound of one route call, in seconds; past it all tools are kept.
        max_conversations: how many conversations' answers are cached.
    """

    enabled: bool = True
    max_tools: int = 30
    max_servers: int = 4
    timeout: float = 2.0
    max_conversations: int = 1000

    def __post_init__(self) -> None:
        if self.max_tools < 1 or self.max_servers < 1:
            raise ConfigError(f"max_tools={self.max_tools}, max_servers={self.max_servers}: want positive integers")
        if self.timeout <= 0 or self.max_conversations < 1:
            raise ConfigError("timeout and max_conversations must be positive")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, enabled: bool | None = None,
                 max_tools: int | None = None, max_servers: int | None = None,
                 timeout: float | None = None) -> RoutingConfig:
        """from_env reads the three variables from environ (default os.environ); arguments given override them."""
        env = os.environ if environ is None else environ
        cfg = cls(enabled=_env_bool(env, ENV_ENABLE, True),
                  max_tools=_env_count(env, ENV_MAX_TOOLS, 30),
                  max_servers=_env_count(env, ENV_MAX_SERVERS, 4))
        if enabled is not None:
            cfg = replace(cfg, enabled=enabled)
        if max_tools is not None:
            cfg = replace(cfg, max_tools=max_tools)
        if max_servers is not None:
            cfg = replace(cfg, max_servers=max_servers)
        if timeout is not None:
            cfg = replace(cfg, timeout=timeout)
        return cfg

    def should_route(self, tools: Sequence[AgentTool]) -> bool:
        """should_route: enabled, and more tools than max_tools on more servers than max_servers."""
        return (self.enabled and len(tools) > self.max_tools
                and len({t.server for t in tools}) > self.max_servers)


@dataclass(frozen=True)
class AgentTool:
    """AgentTool is one of the agent's tools (input_schema is its JSON Schema, as the agent holds it)."""

    name: str
    server: str
    description: str = ""
    input_schema: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class FilterResult:
    """FilterResult is the tools to show the model for this turn.

    routed is False when routing is off or the agent is below the
    thresholds (all tools, no call); cached when an earlier turn's answer
    was reused; fallback when the call failed and all tools were kept
    (error says why).
    """

    tools: tuple[AgentTool, ...]
    relevant_servers: tuple[str, ...] = ()
    reasoning: str = ""
    routed: bool = False
    cached: bool = False
    fallback: bool = False
    error: ClassifierdError | None = None


@dataclass(frozen=True)
class _Answer:
    servers: tuple[str, ...]
    tools: frozenset[str] | None  # server/name; None keeps every tool (abstained)
    reasoning: str


class Router:
    """Router filters an agent's tools through classifierd, like the Go client's Router.

    It routes once per conversation (the whole conversation is sent) and
    reuses the answer on later turns until refresh(); on any error or
    timeout it keeps every tool, so routing never breaks a turn. It is safe
    to share between threads.
    """

    def __init__(self, client: Client, config: RoutingConfig | None = None) -> None:
        self._client = client
        self.config = RoutingConfig.from_env() if config is None else config
        self._cache: OrderedDict[str, _Answer] = OrderedDict()
        self._lock = threading.Lock()

    def filter_tools(self, conversation_id: str, conversation: Iterable[Message | tuple[str, str]],
                     tools: Sequence[AgentTool]) -> FilterResult:
        """filter_tools returns the tools relevant to the conversation (all of them when routing does not apply)."""
        if not self.config.should_route(tools):
            return FilterResult(tools=tuple(tools))
        with self._lock:
            answer = self._cache.get(conversation_id)
        if answer is not None:
            return self._apply(answer, tools, cached=True)
        turns = list(conversation)
        if not turns:
            raise ValueError("conversation has no message")
        try:
            res = self._client.route(messages=turns, on_no_match=NoMatchPolicy.ALL, timeout=self.config.timeout)
        except ClassifierdError as err:
            return FilterResult(tools=tuple(tools), routed=True, fallback=True, error=err)
        if res.abstained:
            answer = _Answer(servers=(), tools=None, reasoning=res.reasoning)
        else:
            answer = _Answer(servers=tuple(s.id for s in res.servers),
                             tools=frozenset(f"{t.server}/{t.name}" for t in res.tools), reasoning=res.reasoning)
        with self._lock:
            self._cache[conversation_id] = answer
            while len(self._cache) > self.config.max_conversations:
                self._cache.popitem(last=False)
        return self._apply(answer, tools, cached=False)

    def refresh(self, conversation_id: str) -> None:
        """refresh forgets a conversation's answer, so its next turn routes again."""
        with self._lock:
            self._cache.pop(conversation_id, None)

    @staticmethod
    def _apply(answer: _Answer, tools: Sequence[AgentTool], cached: bool) -> FilterResult:
        if answer.tools is None:
            return FilterResult(tools=tuple(tools), reasoning=answer.reasoning, routed=True, cached=cached)
        kept = [t for t in tools if f"{t.server}/{t.name}" in answer.tools]
        matched = {t.server for t in kept}
        # A relevant server whose tools the daemon does not know by name keeps all of them.
        kept += [t for t in tools if t.server in answer.servers and t.server not in matched]
        return FilterResult(tools=tuple(kept), relevant_servers=answer.servers, reasoning=answer.reasoning,
                            routed=True, cached=cached)
