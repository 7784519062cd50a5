"""What Client and AsyncClient share: the channel, what every call carries, how a failed call is raised.

The two clients differ only in blocking or awaiting; everything else about
talking to the daemon is here, once: opening the channel (plaintext or TLS),
the default deadline, the bearer token, and the mapping of a grpc.RpcError
to its classifierd.errors exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Generic, TypedDict, TypeVar

import grpc
from grpc import aio

from classifierd.errors import from_rpc_error

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT = 5.0

Metadata = tuple[tuple[str, str], ...]
ChannelOptions = Sequence[tuple[str, int | str]]

ChannelT = TypeVar("ChannelT", grpc.Channel, aio.Channel)


def channel_credentials(root_certificates: bytes | None, tls: bool) -> grpc.ChannelCredentials | None:
    """TLS credentials when asked for (root_certificates implies TLS), else None (plaintext)."""
    if root_certificates is None and not tls:
        return None
    return grpc.ssl_channel_credentials(root_certificates=root_certificates)


def metadata(token: str | None) -> Metadata:
    """The per-call metadata: the bearer token, if any."""
    if not token:
        return ()
    return (("authorization", f"Bearer {token}"),)


class CallOptions(TypedDict):
    """The keyword arguments every unary call takes."""

    timeout: float
    metadata: Metadata


class ClientBase(Generic[ChannelT]):
    """ClientBase opens the channel and holds what every call carries.

    A subclass says how to open its kind of channel (_open) and makes its
    stubs on it (_connected); its methods call them with _call_options
    inside rpc_errors().
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, timeout: float = DEFAULT_TIMEOUT,
                 token: str | None = None, root_certificates: bytes | None = None, tls: bool = False,
                 options: ChannelOptions = ()) -> None:
        self._channel: ChannelT = self._open(target, channel_credentials(root_certificates, tls), list(options))
        self._timeout = timeout
        self._metadata = metadata(token)
        self._connected()

    def _open(self, target: str, creds: grpc.ChannelCredentials | None,
              options: list[tuple[str, int | str]]) -> ChannelT:
        """_open opens the channel: plaintext when creds is None."""
        raise NotImplementedError

    def _connected(self) -> None:
        """_connected makes the stubs on the open channel."""
        raise NotImplementedError

    def _call_options(self, timeout: float | None) -> CallOptions:
        """The deadline (the client's default unless given) and the metadata of one call."""
        return {"timeout": self._timeout if timeout is None else timeout, "metadata": self._metadata}


class rpc_errors:
    """rpc_errors raises a grpc.RpcError of its block as its classifierd.errors exception.

    The RpcError becomes the exception's __cause__. With ``cancelled``, a
    CANCELLED call (the caller's own cancel() or close()) raises that
    instead, with no cause: it is how a watch ends quietly.
    """

    def __init__(self, cancelled: type[Exception] | None = None) -> None:
        self._cancelled = cancelled

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not isinstance(exc, grpc.RpcError):
            return
        if self._cancelled is not None and getattr(exc, "code", lambda: None)() == grpc.StatusCode.CANCELLED:
            raise self._cancelled from None
        raise from_rpc_error(exc) from exc
