"""Client: the blocking classifierd client (AsyncClient is its asyncio twin)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import TypeVar

import grpc

from classifierd import _requests as rq
from classifierd._base import ClientBase, rpc_errors
from classifierd._gen.classifier.v1 import classifier_pb2 as pb
from classifierd._gen.classifier.v1 import classifier_pb2_grpc as pb_grpc
from classifierd._gen.terminal.v1 import terminal_pb2 as tpb
from classifierd._gen.terminal.v1 import terminal_pb2_grpc as tpb_grpc
from classifierd.types import (AnalyzePromptResult, ClassifyResult, DetectContextsResult, ExposureEvent,
                               ExposureUpdate, IndexInfo, InputEvent, InputPrompt, InputSuggestion, Message,
                               NoMatchPolicy, RouteResult, Session, Stats, ToolList)

__all__ = ["Client", "ExposureWatch", "TerminalClient"]

Resp = TypeVar("Resp")


class Client(ClientBase[grpc.Channel]):
    """Client calls classifier.v1.ClassifierService over one gRPC channel.

    Every method takes an optional ``timeout`` in seconds (default: the
    client's ``timeout``, 5 s) and raises a ``classifierd.errors``
    exception named after the status code when the call fails. A Client is
    safe to share between threads; use it as a context manager, or call
    close().

    Args:
        target: host:port of classifierd (default 127.0.0.1:50051, the README's).
        timeout: default deadline of every unary call, in seconds.
        token: sent as ``authorization: Bearer <token>`` on every call.
        root_certificates: PEM roots to verify the daemon's TLS certificate;
            giving them turns TLS on.
        tls: use TLS with the system's roots.
        options: extra gRPC channel options.
    """

    terminal: TerminalClient
    """terminal.v1.TerminalService (served by ``classifierd --terminal``)."""

    def _open(self, target: str, creds: grpc.ChannelCredentials | None,
              options: list[tuple[str, int | str]]) -> grpc.Channel:
        if creds is None:
            return grpc.insecure_channel(target, options=options)
        return grpc.secure_channel(target, creds, options=options)

    def _connected(self) -> None:
        self._stub = pb_grpc.ClassifierServiceStub(self._channel)
        self.terminal = TerminalClient(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """close closes the channel; open watches end."""
        self._channel.close()

    def _call(self, method: Callable[..., Resp], request: object, timeout: float | None) -> Resp:
        with rpc_errors():
            return method(request, **self._call_options(timeout))

    def wait_ready(self, timeout: float = 10.0) -> None:
        """wait_ready blocks until the channel is connected (raises grpc.FutureTimeoutError after timeout)."""
        grpc.channel_ready_future(self._channel).result(timeout=timeout)

    def classify(self, text: str, *, top_k: int = 0, min_confidence: float | None = None,
                 timeout: float | None = None) -> ClassifyResult:
        """classify returns the categories of one text, best first (top_k 0: the daemon's 3)."""
        resp: pb.ClassifyResponse = self._call(self._stub.Classify, rq.classify(text, top_k, min_confidence), timeout)
        return ClassifyResult._from_pb(resp)

    def route(self, query: str = "", *, messages: Iterable[Message | tuple[str, str]] = (),
              max_servers: int = 0, max_tools: int = 0, min_confidence: float | None = None,
              include_servers: Sequence[str] = (), exclude_servers: Sequence[str] = (),
              on_no_match: NoMatchPolicy = NoMatchPolicy.UNSPECIFIED,
              timeout: float | None = None) -> RouteResult:
        """route returns the MCP servers and tools a query and/or conversation needs.

        messages are (role, content) pairs or Message values, oldest first;
        max_servers and max_tools 0 take the daemon's defaults (5 and 20).
        """
        req = rq.route(query, messages, max_servers, max_tools, min_confidence, include_servers,
                       exclude_servers, on_no_match)
        resp: pb.RouteResponse = self._call(self._stub.Route, req, timeout)
        return RouteResult._from_pb(resp)

    def analyze_prompt(self, prompt: str, *, context: str = "", valid_categories: Sequence[str] = (),
                       session_id: str = "", mode: str = "", timeout: float | None = None) -> AnalyzePromptResult:
        """analyze_prompt answers a hub's analyze_prompt meta-tool.

        With session_id the answer is applied to that session's exposure
        (mode "additive", the default, or "replacement").
        """
        req = rq.analyze_prompt(prompt, context, valid_categories, session_id, mode)
        resp: pb.AnalyzePromptResponse = self._call(self._stub.AnalyzePrompt, req, timeout)
        return AnalyzePromptResult._from_pb(resp)

    def detect_contexts(self, text: str, *, timeout: float | None = None) -> DetectContextsResult:
        """detect_contexts tells which contexts (catalog categories) a message touches."""
        resp: pb.DetectContextsResponse = self._call(self._stub.DetectContexts,
                                                     pb.DetectContextsRequest(text=text), timeout)
        return DetectContextsResult._from_pb(resp)

    def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> list[list[float]]:
        """embed returns one normalised sentence embedding per text, in order."""
        resp: pb.EmbedResponse = self._call(self._stub.Embed, pb.EmbedRequest(texts=list(texts)), timeout)
        return [list(v.values) for v in resp.vectors]

    def index_info(self, *, timeout: float | None = None) -> IndexInfo:
        """index_info describes the served model and index, and the daemon's input limits."""
        resp: pb.GetIndexInfoResponse = self._call(self._stub.GetIndexInfo, pb.GetIndexInfoRequest(), timeout)
        return IndexInfo._from_pb(resp)

    def stats(self, *, timeout: float | None = None) -> Stats:
        """stats returns the daemon's cumulative request and token-saving counters."""
        resp: pb.GetStatsResponse = self._call(self._stub.GetStats, pb.GetStatsRequest(), timeout)
        return Stats._from_pb(resp)

    def create_session(self, session_id: str = "", *, default_exposure: str = "",
                       timeout: float | None = None) -> Session:
        """create_session starts a hub session (id generated when empty).

        default_exposure is zero, meta-only, minimal or all; empty takes the
        daemon's --default-exposure.
        """
        resp: pb.CreateSessionResponse = self._call(
            self._stub.CreateSession,
            pb.CreateSessionRequest(session_id=session_id, default_exposure=default_exposure), timeout)
        return Session._from_pb(resp.session)

    def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        """get_session returns a session's exposure and history (NotFound when unknown or expired)."""
        resp: pb.GetSessionResponse = self._call(self._stub.GetSession,
                                                 pb.GetSessionRequest(session_id=session_id), timeout)
        return Session._from_pb(resp.session)

    def update_exposure(self, session_id: str, categories: Sequence[str], *, mode: str = "",
                        timeout: float | None = None) -> ExposureUpdate:
        """update_exposure adds (mode additive, the default) or replaces a session's exposed categories."""
        req = pb.UpdateExposureRequest(session_id=session_id, categories=list(categories), mode=mode)
        resp: pb.UpdateExposureResponse = self._call(self._stub.UpdateExposure, req, timeout)
        return ExposureUpdate._from_pb(resp)

    def list_tools(self, session_id: str, *, timeout: float | None = None) -> ToolList:
        """list_tools returns the session's filtered tools/list with token accounting."""
        resp: pb.ListToolsResponse = self._call(self._stub.ListTools,
                                                pb.ListToolsRequest(session_id=session_id), timeout)
        return ToolList._from_pb(resp)

    def delete_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """delete_session ends a session; its watches end."""
        self._call(self._stub.DeleteSession, pb.DeleteSessionRequest(session_id=session_id), timeout)

    def watch_exposure(self, session_id: str, *, timeout: float | None = None) -> ExposureWatch:
        """watch_exposure streams one ExposureEvent per actual change of a session's exposure.

        It returns once the daemon has registered the watch, so no change
        made after it returns is missed. Iterate the returned ExposureWatch.
        When the session is deleted or
        expires, iteration raises NotFound; after cancel() or close() it just
        stops. timeout (none by default) bounds the whole stream. A watcher
        that falls more than 16 events behind gets Unavailable: watch again.
        """
        call = self._stub.WatchExposure(pb.WatchExposureRequest(session_id=session_id), timeout=timeout,
                                        metadata=self._metadata)
        # The daemon sends the headers once the watch is registered (or ends
        # the call at once, e.g. NotFound, which iterating then raises).
        call.initial_metadata()
        return ExposureWatch(call)


class ExposureWatch(Iterator[ExposureEvent]):
    """ExposureWatch iterates a session's exposure changes; cancel() (or leaving a with block) ends it."""

    def __init__(self, call: Iterator[pb.WatchExposureResponse]) -> None:
        self._call = call

    def __iter__(self) -> ExposureWatch:
        return self

    def __next__(self) -> ExposureEvent:
        # cancel() or close(): the watch ends quietly.
        with rpc_errors(cancelled=StopIteration):
            return ExposureEvent._from_pb(next(self._call))

    def cancel(self) -> None:
        """cancel ends the stream; a blocked iteration stops (StopIteration)."""
        cancel = getattr(self._call, "cancel", None)
        if callable(cancel):
            cancel()

    def __enter__(self) -> ExposureWatch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cancel()


class TerminalClient:
    """TerminalClient calls terminal.v1.TerminalService over its Client's channel.

    The daemon serves it only with --terminal; otherwise every method
    raises Unimplemented.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._stub = tpb_grpc.TerminalServiceStub(client._channel)

    def detect_input_prompt(self, *, session_id: str = "", text: str = "", min_confidence: float | None = None,
                            command_line: str = "", program: str = "",
                            timeout: float | None = None) -> InputPrompt | None:
        """detect_input_prompt returns the prompt a terminal waits at, or None.

        Give session_id (a log in the daemon's --terminal-logs) or text (the
        output tail, at most 64 KiB).
        """
        req = rq.detect_input_prompt(session_id, text, min_confidence, command_line, program)
        resp: tpb.DetectInputPromptResponse = self._client._call(self._stub.DetectInputPrompt, req, timeout)
        return InputPrompt._from_pb(resp.prompt) if resp.detected else None

    def infer_expected_input(self, prompt_text: str, *, prompt_type: str = "", session_context: str = "",
                             session_id: str = "", timeout: float | None = None) -> list[InputSuggestion]:
        """infer_expected_input suggests answers to a prompt, best first (none for secrets)."""
        req = tpb.InferExpectedInputRequest(prompt_text=prompt_text, prompt_type=prompt_type,
                                            session_context=session_context, session_id=session_id)
        resp: tpb.InferExpectedInputResponse = self._client._call(self._stub.InferExpectedInput, req, timeout)
        return [InputSuggestion(input_text=s.input_text, confidence=s.confidence, source=s.source,
                                reasoning=s.reasoning) for s in resp.suggestions]

    def track_input_event(self, session_id: str, prompt_text: str, input_text: str, *, success: bool = True,
                          input_source: str = "user_typed", response_time_ms: int = 0, prompt_type: str = "",
                          echo_off: bool | None = None, canonical_mode: bool | None = None,
                          timeout: float | None = None) -> str:
        """track_input_event records an answer to a prompt and returns the event id."""
        req = rq.track_input_event(session_id, prompt_text, input_text, success, input_source,
                                   response_time_ms, prompt_type, echo_off, canonical_mode)
        resp: tpb.TrackInputEventResponse = self._client._call(self._stub.TrackInputEvent, req, timeout)
        return resp.event_id

    def get_session_history(self, session_id: str, *, limit: int = 0,
                            timeout: float | None = None) -> list[InputEvent]:
        """get_session_history returns a terminal session's recorded events, oldest first."""
        resp: tpb.GetSessionHistoryResponse = self._client._call(
            self._stub.GetSessionHistory, tpb.GetSessionHistoryRequest(session_id=session_id, limit=limit), timeout)
        return [InputEvent._from_pb(e) for e in resp.events]

    def delete_session_history(self, session_id: str, *, timeout: float | None = None) -> int:
        """delete_session_history deletes a terminal session's events (and what they taught); returns the count."""
        resp: tpb.DeleteSessionHistoryResponse = self._client._call(
            self._stub.DeleteSessionHistory, tpb.DeleteSessionHistoryRequest(session_id=session_id), timeout)
        return resp.deleted_events
