"""Fakes of what agentv talks to: the loopback fake LM server (``llm_server``, shared by
tests and benchmarks) and its strict request checks (``strict``), and the programs the
agent tests put on PATH in place of ``codex`` (``codex_cli.py``) and VS Code's ``code``
(``vscode_cli.py``), which are run, never imported."""

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
