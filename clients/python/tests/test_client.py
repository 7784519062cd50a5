"""The blocking Client against the real daemon and model."""

from __future__ import annotations

import queue
import socket
import threading
from concurrent import futures
from typing import Any

import grpc
import pytest

from classifierd import (
    ClassifierdError,
    Client,
    DeadlineExceeded,
    ExposureWatch,
    InvalidArgument,
    Message,
    NoMatchPolicy,
    NotFound,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
)
from classifierd.types import ExposureEvent

from conftest import MAX_SESSIONS, Daemon, _free_port


def test_route_names_github(client: Client) -> None:
    res = client.route("Check my GitHub notifications")
    assert res.servers[0].id == "github"
    assert 0.5 < res.servers[0].confidence <= 1
    assert any(t.server == "github" and t.name == "list_notifications" for t in res.tools)
    assert res.stats.total_tools > res.stats.selected_tools > 0
    assert res.stats.tokens_total > res.stats.tokens_returned > 0
    assert not res.abstained
    assert "github" in res.reasoning


def test_route_conversation_and_policy(client: Client) -> None:
    res = client.route(messages=[("user", "list my open pull requests"),
                                 Message("assistant", "Which repository?"),
                                 ("user", "classifierd")], max_tools=3)
    assert res.servers[0].id == "github"
    assert 0 < len(res.tools) <= 3
    none = client.route("bake me a lasagna", on_no_match=NoMatchPolicy.NONE)
    assert none.abstained
    assert none.tools == ()
    assert none.applied_policy is NoMatchPolicy.NONE
    everything = client.route("bake me a lasagna", on_no_match=NoMatchPolicy.ALL)
    assert everything.applied_policy is NoMatchPolicy.ALL
    assert len(everything.tools) == everything.stats.total_tools


def test_classify_and_contexts(client: Client) -> None:
    res = client.classify("Check my GitHub notifications", top_k=3)
    assert res.categories[0].id == "github"
    assert not res.abstained
    ctx = client.detect_contexts("please look at PROJ-123 before the release")
    assert "jira" in [c.id for c in ctx.contexts]


def test_analyze_prompt(client: Client) -> None:
    res = client.analyze_prompt("Check my GitHub notifications")
    assert res.categories[0] == "github"
    assert res.confidence >= 0.7
    assert res.next_step.startswith("proceed")
    empty = client.analyze_prompt("   ")
    assert empty.categories == ("meta",)
    assert empty.confidence == 0
    ignored = client.analyze_prompt("Check my GitHub notifications", valid_categories=["github", "nope"])
    assert ignored.ignored_categories == ("nope",)


def test_embed_and_index_info(client: Client) -> None:
    info = client.index_info()
    assert info.model_name == "all-MiniLM-L6-v2-int8"
    assert info.categories == 17 and info.tools > 100
    vectors = client.embed(["hello", "world"])
    assert len(vectors) == 2 and len(vectors[0]) == info.dimensions
    norm = sum(v * v for v in vectors[0])
    assert abs(norm - 1) < 1e-3


def _watch_into(watch: ExposureWatch, out: queue.Queue[ExposureEvent | ClassifierdError | None]) -> threading.Thread:
    def run() -> None:
        try:
            for event in watch:
                out.put(event)
        except ClassifierdError as err:
            out.put(err)  # the stream failed
            return
        out.put(None)  # the stream ended

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_session_flow_and_watch(client: Client) -> None:
    a = client.create_session(default_exposure="meta-only")
    b = client.create_session(default_exposure="meta-only")
    assert a.exposed_categories == ("meta",)
    assert a.history[0].operation == "create" and a.created_at is not None
    before = client.list_tools(a.id)
    assert before.tools and all(t.category == "meta" for t in before.tools)

    events_a: queue.Queue[ExposureEvent | ClassifierdError | None] = queue.Queue()
    events_b: queue.Queue[ExposureEvent | ClassifierdError | None] = queue.Queue()
    watch_a = client.watch_exposure(a.id)
    watch_b = client.watch_exposure(b.id)
    ta = _watch_into(watch_a, events_a)
    tb = _watch_into(watch_b, events_b)
    # watch_exposure returned: the watches are registered, so no change below is missed.

    res = client.analyze_prompt("Check my GitHub notifications", session_id=a.id)
    assert res.changed and "github" in res.added
    event = events_a.get(timeout=10)
    assert isinstance(event, ExposureEvent)
    assert event.session_id == a.id
    assert "github" in event.change.added
    assert "github" in event.exposed_categories

    after = client.list_tools(a.id)
    assert any(t.server == "github" for t in after.tools)
    assert after.stats.tokens_returned > before.stats.tokens_returned

    upd = client.update_exposure(a.id, ["docker"], mode="replacement")
    assert upd.changed and upd.exposed_categories == ("docker",) and "github" in upd.removed
    event = events_a.get(timeout=10)
    assert isinstance(event, ExposureEvent) and event.change.operation == "replacement"
    got = client.get_session(a.id)
    assert [h.operation for h in got.history] == ["create", "additive", "replacement"]

    assert client.get_session(b.id).exposed_categories == ("meta",)
    assert events_b.empty(), "the other session got an event"

    client.delete_session(a.id)
    ended = events_a.get(timeout=10)
    assert isinstance(ended, NotFound), f"deleting the session ends its watch with NotFound, got {ended!r}"
    ta.join(timeout=10)
    with pytest.raises(NotFound):
        client.get_session(a.id)

    watch_b.cancel()
    assert events_b.get(timeout=10) is None, "cancel ends the iteration quietly"
    tb.join(timeout=10)
    client.delete_session(b.id)


def test_errors_map_to_exceptions(client: Client, daemon: Daemon) -> None:
    with pytest.raises(InvalidArgument) as err:
        client.classify("")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(err.value.__cause__, grpc.RpcError)
    with pytest.raises(InvalidArgument):
        client.analyze_prompt("x", mode="merge")
    with pytest.raises(InvalidArgument):
        client.create_session(default_exposure="bogus")
    with pytest.raises(NotFound):
        client.list_tools("no-such-session")
    with pytest.raises(NotFound):
        next(client.watch_exposure("no-such-session"))
    # A listener that never speaks HTTP/2: the deadline expires in the client.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with Client(f"127.0.0.1:{silent.getsockname()[1]}") as stuck:
            with pytest.raises(DeadlineExceeded):
                stuck.route("Check my GitHub notifications", timeout=0.3)
    with Client(f"127.0.0.1:{_free_port()}", timeout=2) as nobody:
        with pytest.raises(Unavailable):
            nobody.index_info()


def test_session_limit_is_resource_exhausted(client: Client) -> None:
    # The fixture daemon runs with --max-sessions MAX_SESSIONS; other tests delete theirs.
    made = []
    try:
        with pytest.raises(ResourceExhausted):
            for _ in range(MAX_SESSIONS + 1):
                made.append(client.create_session().id)
        assert len(made) <= MAX_SESSIONS
    finally:
        for sid in made:
            client.delete_session(sid)
    client.delete_session(client.create_session().id)  # room again


def test_stats(client: Client) -> None:
    client.route("Check my GitHub notifications")
    stats = client.stats()
    assert stats.requests_by_method.get("Route", 0) >= 1
    assert stats.tokens_baseline > stats.tokens_returned
    assert stats.since is not None


def test_terminal(client: Client) -> None:
    prompt = client.terminal.detect_input_prompt(text="Enter password: ")
    assert prompt is not None and prompt.prompt_type == "password"
    assert client.terminal.detect_input_prompt(text="build finished\n") is None
    assert client.terminal.infer_expected_input("Enter password: ") == []
    suggestions = client.terminal.infer_expected_input("Do you want to continue? [Y/n] ")
    assert suggestions and suggestions[0].input_text.lower() in ("y", "yes", "n", "no")
    client.terminal.track_input_event("term-1", "Continue? [y/N] ", "y")
    history = client.terminal.get_session_history("term-1")
    assert [e.input_text for e in history] == ["y"]
    assert client.terminal.delete_session_history("term-1") == 1
    with pytest.raises(InvalidArgument):
        client.terminal.detect_input_prompt(text="x" * (64 * 1024 + 1))


class _Recorder(grpc.GenericRpcHandler):
    """Answers every call with UNIMPLEMENTED and records its metadata (a unit test of the client's metadata)."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        self.metadata.append({k: str(v) for k, v in details.invocation_metadata})
        return None


def test_token_is_sent_as_bearer_metadata() -> None:
    rec = _Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[rec])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Client(f"127.0.0.1:{port}", token="s3cret") as c:
            with pytest.raises(Unimplemented):
                c.index_info()
        assert rec.metadata[-1]["authorization"] == "Bearer s3cret"
        with Client(f"127.0.0.1:{port}") as c:
            with pytest.raises(ClassifierdError):
                c.index_info()
        assert "authorization" not in rec.metadata[-1]
    finally:
        server.stop(None)
