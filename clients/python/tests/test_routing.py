"""Smart routing configured by the environment, and the Router against the real daemon."""

from __future__ import annotations

import pytest

from classifierd import AgentTool, Client, ConfigError, Router, RoutingConfig

from conftest import _free_port


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, RoutingConfig(enabled=True, max_tools=30, max_servers=4)),
        ({"ENABLE_SMART_ROUTING": "false"}, RoutingConfig(enabled=False)),
        ({"ENABLE_SMART_ROUTING": "0", "SMART_ROUTING_MAX_TOOLS": "50"}, RoutingConfig(enabled=False, max_tools=50)),
        ({"ENABLE_SMART_ROUTING": " TRUE ", "SMART_ROUTING_MAX_SERVERS": "2"}, RoutingConfig(max_servers=2)),
        ({"ENABLE_SMART_ROUTING": "", "SMART_ROUTING_MAX_TOOLS": ""}, RoutingConfig()),
    ],
)
def test_config_from_env(env: dict[str, str], want: RoutingConfig) -> None:
    assert RoutingConfig.from_env(env) == want


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"ENABLE_SMART_ROUTING": "maybe"}, "ENABLE_SMART_ROUTING"),
        ({"SMART_ROUTING_MAX_TOOLS": "many"}, "SMART_ROUTING_MAX_TOOLS"),
        ({"SMART_ROUTING_MAX_TOOLS": "0"}, "SMART_ROUTING_MAX_TOOLS"),
        ({"SMART_ROUTING_MAX_SERVERS": "-1"}, "SMART_ROUTING_MAX_SERVERS"),
        ({"SMART_ROUTING_MAX_SERVERS": "2.5"}, "SMART_ROUTING_MAX_SERVERS"),
    ],
)
def test_config_from_env_rejects(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        RoutingConfig.from_env(env)


def test_config_overrides_and_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENABLE_SMART_ROUTING", "false")
    monkeypatch.setenv("SMART_ROUTING_MAX_TOOLS", "10")
    monkeypatch.delenv("SMART_ROUTING_MAX_SERVERS", raising=False)
    assert RoutingConfig.from_env() == RoutingConfig(enabled=False, max_tools=10, max_servers=4)
    assert RoutingConfig.from_env(enabled=True, max_servers=1) == RoutingConfig(enabled=True, max_tools=10,
                                                                                 max_servers=1)
    with pytest.raises(ConfigError):
        RoutingConfig.from_env({}, max_tools=0)


def _tools(servers: int, per: int) -> list[AgentTool]:
    return [AgentTool(name=f"tool{i}", server=f"srv{s}") for s in range(servers) for i in range(per)]


def test_should_route_thresholds() -> None:
    cfg = RoutingConfig()
    assert not cfg.should_route(_tools(6, 5))  # 30 tools: not more than 30
    assert not cfg.should_route(_tools(4, 10))  # 4 servers: not more than 4
    assert cfg.should_route(_tools(5, 7))
    assert not RoutingConfig(enabled=False).should_route(_tools(5, 7))


def _catalog_tools(client: Client) -> list[AgentTool]:
    session = client.create_session(default_exposure="all")
    try:
        listed = client.list_tools(session.id)
    finally:
        client.delete_session(session.id)
    return [AgentTool(name=t.name, server=t.server, description=t.description) for t in listed.tools]


def test_router_filters_real_catalog(client: Client) -> None:
    tools = _catalog_tools(client)
    assert len(tools) > 30 and len({t.server for t in tools}) > 4
    router = Router(client, RoutingConfig.from_env({}))
    conv = [("user", "Check my GitHub notifications")]
    res = router.filter_tools("conv-1", conv, tools)
    assert res.routed and not res.fallback and not res.cached
    assert res.relevant_servers[0] == "github"
    assert 0 < len(res.tools) < len(tools)
    assert {t.server for t in res.tools} <= set(res.relevant_servers)
    again = router.filter_tools("conv-1", conv + [("user", "thanks")], tools)
    assert again.cached and again.tools == res.tools
    router.refresh("conv-1")
    assert not router.filter_tools("conv-1", conv, tools).cached

    off = Router(client, RoutingConfig.from_env({"ENABLE_SMART_ROUTING": "false"}))
    res = off.filter_tools("conv-2", conv, tools)
    assert not res.routed and res.tools == tuple(tools)
    high = Router(client, RoutingConfig.from_env({"SMART_ROUTING_MAX_TOOLS": str(len(tools))}))
    assert not high.filter_tools("conv-3", conv, tools).routed


def test_router_falls_back_to_all_tools() -> None:
    with Client(f"127.0.0.1:{_free_port()}") as nobody:
        tools = _tools(6, 6)
        res = Router(nobody, RoutingConfig(timeout=1)).filter_tools("c", [("user", "hi")], tools)
        assert res.routed and res.fallback and res.error is not None
        assert res.tools == tuple(tools)


def test_router_cache_is_bounded(client: Client) -> None:
    tools = _catalog_tools(client)
    router = Router(client, RoutingConfig(max_conversations=1))
    conv = [("user", "Check my GitHub notifications")]
    router.filter_tools("a", conv, tools)
    assert router.filter_tools("a", conv, tools).cached
    router.filter_tools("b", conv, tools)  # evicts "a"
    assert not router.filter_tools("a", conv, tools).cached
