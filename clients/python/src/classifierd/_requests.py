"""Request builders shared by Client and AsyncClient (one place per RPC)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from classifierd._gen.classifier.v1 import classifier_pb2 as pb
from classifierd._gen.terminal.v1 import terminal_pb2 as tpb
from classifierd.types import Message, NoMatchPolicy

def messages(turns: Iterable[Message | tuple[str, str]]) -> list[pb.Message]:
    out = []
    for t in turns:
        if isinstance(t, Message):
            out.append(t._pb())
        else:
            role, content = t
            out.append(pb.Message(role=role, content=content))
    return out


def classify(text: str, top_k: int, min_confidence: float | None) -> pb.ClassifyRequest:
    req = pb.ClassifyRequest(text=text, top_k=top_k)
    if min_confidence is not None:
        req.min_confidence = min_confidence
    return req


def route(query: str, turns: Iterable[Message | tuple[str, str]], max_servers: int, max_tools: int,
          min_confidence: float | None, include_servers: Sequence[str], exclude_servers: Sequence[str],
          on_no_match: NoMatchPolicy) -> pb.RouteRequest:
    req = pb.RouteRequest(query=query, messages=messages(turns), max_servers=max_servers,
                          max_tools=max_tools, include_servers=list(include_servers),
                          exclude_servers=list(exclude_servers),
                          on_no_match=pb.NoMatchPolicy.ValueType(int(on_no_match)))
    if min_confidence is not None:
        req.min_confidence = min_confidence
    return req


def analyze_prompt(prompt: str, context: str, valid_categories: Sequence[str], session_id: str,
                   mode: str) -> pb.AnalyzePromptRequest:
    return pb.AnalyzePromptRequest(prompt=prompt, context=context, valid_categories=list(valid_categories),
                                   session_id=session_id, mode=mode)


def detect_input_prompt(session_id: str, text: str, min_confidence: float | None, command_line: str,
                        program: str) -> tpb.DetectInputPromptRequest:
    req = tpb.DetectInputPromptRequest(session_id=session_id, text=text, command_line=command_line,
                                       program=program)
    if min_confidence is not None:
        req.min_confidence = min_confidence
    return req


def track_input_event(session_id: str, prompt_text: str, input_text: str, success: bool, input_source: str,
                      response_time_ms: int, prompt_type: str, echo_off: bool | None,
                      canonical_mode: bool | None) -> tpb.TrackInputEventRequest:
    req = tpb.TrackInputEventRequest(session_id=session_id, prompt_text=prompt_text, input_text=input_text,
                                     success=success, input_source=input_source,
                                     response_time_ms=response_time_ms, prompt_type=prompt_type)
    if echo_off is not None:
        req.echo_off = echo_off
    if canonical_mode is not None:
        req.canonical_mode = canonical_mode
    return req
