"""AsyncClient: the asyncio classifierd client (grpc.aio), the twin of Client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import TypeVar

import grpc
from grpc import aio

from classifierd import _requests as rq
from classifierd._base import ClientBase, rpc_errors
from classifierd._gen.classifier.v1 import classifier_pb2 as pb
from classifierd._gen.classifier.v1 import classifier_pb2_grpc as pb_grpc
from classifierd._gen.terminal.v1 import terminal_pb2 as tpb
from classifierd._gen.terminal.v1 import terminal_pb2_grpc as tpb_grpc
from classifierd.types import (AnalyzePromptResult, ClassifyResult, DetectContextsResult, ExposureEvent,
                               ExposureUpdate, IndexInfo, InputEvent, InputPrompt, InputSuggestion, Message,
                               NoMatchPolicy, RouteResult, Session, Stats, ToolList)

__all__ = ["AsyncClient", "AsyncExposureWatch", "AsyncTerminalClient"]

Resp = TypeVar("Resp")


class AsyncClient(ClientBase[aio.Channel]):
    """AsyncClient calls classifier.v1.ClassifierService with grpc.aio.

    Same methods, arguments and results as Client, as coroutines; create
    it inside the event loop that uses it, and ``async with`` it (or await
    close()).
    """

    terminal: AsyncTerminalClient
    """terminal.v1.TerminalService (served by ``classifierd --terminal``)."""

    def _open(self, target: str, creds: grpc.ChannelCredentials | None,
              options: list[tuple[str, int | str]]) -> aio.Channel:
        if creds is None:
            return aio.insecure_channel(target, options=options)
        return aio.secure_channel(target, creds, options=options)

    def _connected(self) -> None:
        self._stub = pb_grpc.ClassifierServiceStub(self._channel)
        self.terminal = AsyncTerminalClient(self)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """close closes the channel; open watches end."""
        await self._channel.close()

    async def _call(self, method: Callable[..., Awaitable[Resp]], request: object, timeout: float | None) -> Resp:
        with rpc_errors():
            return await method(request, **self._call_options(timeout))

    async def wait_ready(self) -> None:
        """wait_ready waits until the channel is connected (bound it with asyncio.wait_for)."""
        await self._channel.channel_ready()

    async def classify(self, text: str, *, top_k: int = 0, min_confidence: float | None = None,
                       timeout: float | None = None) -> ClassifyResult:
        """classify: see Client.classify."""
        resp: pb.ClassifyResponse = await self._call(self._stub.Classify, rq.classify(text, top_k, min_confidence),
                                                     timeout)
        return ClassifyResult._from_pb(resp)

    async def route(self, query: str = "", *, messages: Iterable[Message | tuple[str, str]] = (),
                    max_servers: int = 0, max_tools: int = 0, min_confidence: float | None = None,
                    include_servers: Sequence[str] = (), exclude_servers: Sequence[str] = (),
                    on_no_match: NoMatchPolicy = NoMatchPolicy.UNSPECIFIED,
                    timeout: float | None = None) -> RouteResult:
        """route: see Client.route."""
        req = rq.route(query, messages, max_servers, max_tools, min_confidence, include_servers,
                       exclude_servers, on_no_match)
        resp: pb.RouteResponse = await self._call(self._stub.Route, req, timeout)
        return RouteResult._from_pb(resp)

    async def analyze_prompt(self, prompt: str, *, context: str = "", valid_categories: Sequence[str] = (),
                             session_id: str = "", mode: str = "",
                             timeout: float | None = None) -> AnalyzePromptResult:
        """analyze_prompt: see Client.analyze_prompt."""
        req = rq.analyze_prompt(prompt, context, valid_categories, session_id, mode)
        resp: pb.AnalyzePromptResponse = await self._call(self._stub.AnalyzePrompt, req, timeout)
        return AnalyzePromptResult._from_pb(resp)

    async def detect_contexts(self, text: str, *, timeout: float | None = None) -> DetectContextsResult:
        """detect_contexts: see Client.detect_contexts."""
        resp: pb.DetectContextsResponse = await self._call(self._stub.DetectContexts,
                                                           pb.DetectContextsRequest(text=text), timeout)
        return DetectContextsResult._from_pb(resp)

    async def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> list[list[float]]:
        """embed: see Client.embed."""
        resp: pb.EmbedResponse = await self._call(self._stub.Embed, pb.EmbedRequest(texts=list(texts)), timeout)
        return [list(v.values) for v in resp.vectors]

    async def index_info(self, *, timeout: float | None = None) -> IndexInfo:
        """index_info: see Client.index_info."""
        resp: pb.GetIndexInfoResponse = await self._call(self._stub.GetIndexInfo, pb.GetIndexInfoRequest(), timeout)
        return IndexInfo._from_pb(resp)

    async def stats(self, *, timeout: float | None = None) -> Stats:
        """stats: see Client.stats."""
        resp: pb.GetStatsResponse = await self._call(self._stub.GetStats, pb.GetStatsRequest(), timeout)
        return Stats._from_pb(resp)

    async def create_session(self, session_id: str = "", *, default_exposure: str = "",
                             timeout: float | None = None) -> Session:
        """create_session: see Client.create_session."""
        resp: pb.CreateSessionResponse = await self._call(
            self._stub.CreateSession,
            pb.CreateSessionRequest(session_id=session_id, default_exposure=default_exposure), timeout)
        return Session._from_pb(resp.session)

    async def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        """get_session: see Client.get_session."""
        resp: pb.GetSessionResponse = await self._call(self._stub.GetSession,
                                                       pb.GetSessionRequest(session_id=session_id), timeout)
        return Session._from_pb(resp.session)

    async def update_exposure(self, session_id: str, categories: Sequence[str], *, mode: str = "",
                              timeout: float | None = None) -> ExposureUpdate:
        """update_exposure: see Client.update_exposure."""
        req = pb.UpdateExposureRequest(session_id=session_id, categories=list(categories), mode=mode)
        resp: pb.UpdateExposureResponse = await self._call(self._stub.UpdateExposure, req, timeout)
        return ExposureUpdate._from_pb(resp)

    async def list_tools(self, session_id: str, *, timeout: float | None = None) -> ToolList:
        """list_tools: see Client.list_tools."""
        resp: pb.ListToolsResponse = await self._call(self._stub.ListTools,
                                                      pb.ListToolsRequest(session_id=session_id), timeout)
        return ToolList._from_pb(resp)

    async def delete_session(self, session_id: str, *, timeout: float | None = None) -> None:
        """delete_session: see Client.delete_session."""
        await self._call(self._stub.DeleteSession, pb.DeleteSessionRequest(session_id=session_id), timeout)

    async def watch_exposure(self, session_id: str, *, timeout: float | None = None) -> AsyncExposureWatch:
        """watch_exposure: see Client.watch_exposure; iterate with ``async for``.

        Await it: it returns once the daemon has registered the watch.

        Iteration raises NotFound when the session is deleted or expires,
        and stops quietly after cancel() or close().
        """
        call = self._stub.WatchExposure(pb.WatchExposureRequest(session_id=session_id), timeout=timeout,
                                        metadata=self._metadata)
        try:
            await call.initial_metadata()  # sent once the watch is registered
        except grpc.RpcError:
            pass  # the call ended (NotFound...): iterating raises it
        return AsyncExposureWatch(call)


class AsyncExposureWatch(AsyncIterator[ExposureEvent]):
    """AsyncExposureWatch async-iterates a session's exposure changes; cancel() ends it."""

    def __init__(self, call: aio.UnaryStreamCall[pb.WatchExposureRequest, pb.WatchExposureResponse]) -> None:
        self._call = call
        self._it = call.__aiter__()
        self._cancelled = False

    def __aiter__(self) -> AsyncExposureWatch:
        return self

    async def __anext__(self) -> ExposureEvent:
        try:
            with rpc_errors(cancelled=StopAsyncIteration):  # cancel() or close(): ends quietly
                return ExposureEvent._from_pb(await self._it.__anext__())
        except asyncio.CancelledError:
            # grpc.aio raises CancelledError in the reader after cancel();
            # a cancellation of the reading task itself propagates.
            if self._cancelled:
                raise StopAsyncIteration from None
            raise

    def cancel(self) -> None:
        """cancel ends the stream; iteration stops (StopAsyncIteration)."""
        self._cancelled = True
        self._call.cancel()

    async def __aenter__(self) -> AsyncExposureWatch:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.cancel()


class AsyncTerminalClient:
    """AsyncTerminalClient: TerminalClient's asyncio twin."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._stub = tpb_grpc.TerminalServiceStub(client._channel)

    async def detect_input_prompt(self, *, session_id: str = "", text: str = "",
                                  min_confidence: float | None = None, command_line: str = "", program: str = "",
                                  timeout: float | None = None) -> InputPrompt | None:
        """detect_input_prompt: see TerminalClient.detect_input_prompt."""
        req = rq.detect_input_prompt(session_id, text, min_confidence, command_line, program)
        resp: tpb.DetectInputPromptResponse = await self._client._call(self._stub.DetectInputPrompt, req, timeout)
        return InputPrompt._from_pb(resp.prompt) if resp.detected else None

    async def infer_expected_input(self, prompt_text: str, *, prompt_type: str = "", session_context: str = "",
                                   session_id: str = "", timeout: float | None = None) -> list[InputSuggestion]:
        """infer_expected_input: see TerminalClient.infer_expected_input."""
        req = tpb.InferExpectedInputRequest(prompt_text=prompt_text, prompt_type=prompt_type,
                                            session_context=session_context, session_id=session_id)
        resp: tpb.InferExpectedInputResponse = await self._client._call(self._stub.InferExpectedInput, req, timeout)
        return [InputSuggestion(input_text=s.input_text, confidence=s.confidence, source=s.source,
                                reasoning=s.reasoning) for s in resp.suggestions]

    async def track_input_event(self, session_id: str, prompt_text: str, input_text: str, *, success: bool = True,
                                input_source: str = "user_typed", response_time_ms: int = 0,
                                prompt_type: str = "", echo_off: bool | None = None,
                                canonical_mode: bool | None = None, timeout: float | None = None) -> str:
        """track_input_event: see TerminalClient.track_input_event."""
        req = rq.track_input_event(session_id, prompt_text, input_text, success, input_source,
                                   response_time_ms, prompt_type, echo_off, canonical_mode)
        resp: tpb.TrackInputEventResponse = await self._client._call(self._stub.TrackInputEvent, req, timeout)
        return resp.event_id

    async def get_session_history(self, session_id: str, *, limit: int = 0,
                                  timeout: float | None = None) -> list[InputEvent]:
        """get_session_history: see TerminalClient.get_session_history."""
        resp: tpb.GetSessionHistoryResponse = await self._client._call(
            self._stub.GetSessionHistory, tpb.GetSessionHistoryRequest(session_id=session_id, limit=limit), timeout)
        return [InputEvent._from_pb(e) for e in resp.events]

    async def delete_session_history(self, session_id: str, *, timeout: float | None = None) -> int:
        """delete_session_history: see TerminalClient.delete_session_history."""
        resp: tpb.DeleteSessionHistoryResponse = await self._client._call(
            self._stub.DeleteSessionHistory, tpb.DeleteSessionHistoryRequest(session_id=session_id), timeout)
        return resp.deleted_events
