"""Loopback fakes of external services, shared by tests and benchmarks."""

from fakes.llm_server import (
    DEFAULT_REPLY,
    Every,
    FakeLLMServer,
    Fault,
    RecordedRequest,
    ToolCalls,
    refused,
)

__all__ = [
    "DEFAULT_REPLY",
    "Every",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "ToolCalls",
    "refused",
]
