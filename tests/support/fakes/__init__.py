"""Loopback fakes of external services, shared by tests and benchmarks."""

from support.fakes.llm_server import (
    DEFAULT_REPLY,
    BucketLimit,
    Every,
    FakeLLMServer,
    Fault,
    RecordedRequest,
    ToolCalls,
    WindowLimit,
    refused,
)

__all__ = [
    "DEFAULT_REPLY",
    "BucketLimit",
    "Every",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "ToolCalls",
    "WindowLimit",
    "refused",
]
