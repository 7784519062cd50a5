"""Errors raised by the classifierd client.

Every failed call raises a ClassifierdError subclass named after its gRPC
status code; the original grpc.RpcError is its __cause__. Codes without a
subclass of their own raise ClassifierdError itself.
"""

from __future__ import annotations

import grpc

__all__ = [
    "ClassifierdError",
    "DeadlineExceeded",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "ConfigError",
]


class ClassifierdError(Exception):
    """ClassifierdError is a failed call: code is the gRPC status code, details the daemon's message."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgument(ClassifierdError):
    """InvalidArgument: the request is malformed or past a limit (empty text, unknown mode...)."""


class NotFound(ClassifierdError):
    """NotFound: the session (or terminal session) does not exist or has expired."""


class ResourceExhausted(ClassifierdError):
    """ResourceExhausted: a daemon limit was reached (--max-sessions) or a message is too large."""


class Unavailable(ClassifierdError):
    """Unavailable: the daemon cannot be reached, or a watcher fell behind (watch again)."""


class PermissionDenied(ClassifierdError):
    """PermissionDenied: the credentials are not allowed to make this call."""


class Unauthenticated(ClassifierdError):
    """Unauthenticated: the call carried no valid token."""


class DeadlineExceeded(ClassifierdError):
    """DeadlineExceeded: the call did not finish within its timeout."""


class Unimplemented(ClassifierdError):
    """Unimplemented: the daemon does not serve this RPC (terminal.v1 without --terminal)."""


class ConfigError(ValueError):
    """ConfigError: a smart-routing environment variable or option has an invalid value."""


_BY_CODE: dict[grpc.StatusCode, type[ClassifierdError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
}


def from_rpc_error(err: grpc.RpcError) -> ClassifierdError:
    """from_rpc_error maps a grpc.RpcError (sync or aio) to its ClassifierdError subclass."""
    code_fn = getattr(err, "code", None)
    details_fn = getattr(err, "details", None)
    code = code_fn() if callable(code_fn) else grpc.StatusCode.UNKNOWN
    details = details_fn() if callable(details_fn) else str(err)
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    cls = _BY_CODE.get(code, ClassifierdError)
    return cls(code, str(details or ""))
