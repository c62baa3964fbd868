"""Loopback fakes of external services, shared by tests and benchmarks."""

from fakes.llm_server import (
    DEFAULT_REPLY,
    BucketLimit,
    Every,
    FakeLLMServer,
    Fault,
    RecordedRequest,
    WindowLimit,
)

__all__ = [
    "DEFAULT_REPLY",
    "BucketLimit",
    "Every",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "WindowLimit",
]
