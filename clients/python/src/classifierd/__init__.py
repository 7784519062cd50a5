"""classifierd: typed Python client for the classifierd daemon.

    from classifierd import Client

    with Client("127.0.0.1:50051") as client:
        res = client.route("Check my GitHub notifications")
        print(res.servers[0].id, res.servers[0].confidence)

Client is blocking, AsyncClient its asyncio twin (grpc.aio); both wrap the
stubs grpcio-tools generates from proto/ (classifierd._gen). Errors are
classifierd.errors exceptions named after the gRPC status code. Router and
RoutingConfig give agents smart routing configured by the environment
(ENABLE_SMART_ROUTING, SMART_ROUTING_MAX_TOOLS, SMART_ROUTING_MAX_SERVERS).
"""

from classifierd.aio import AsyncClient, AsyncExposureWatch
from classifierd.client import Client, ExposureWatch
from classifierd.errors import (
    ClassifierdError,
    ConfigError,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from classifierd.routing import AgentTool, FilterResult, Router, RoutingConfig
from classifierd.types import Message, NoMatchPolicy

__all__ = [
    "AgentTool",
    "AsyncClient",
    "AsyncExposureWatch",
    "ClassifierdError",
    "Client",
    "ConfigError",
    "DeadlineExceeded",
    "ExposureWatch",
    "FilterResult",
    "InvalidArgument",
    "Message",
    "NoMatchPolicy",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Router",
    "RoutingConfig",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
]
