"""Writing a project's targets file (``.agentv/targets.yaml``).

A test lists its targets as mappings of their fields, as targets.yaml has them::

    write_targets(repo, lm_target("openai", server), mock_target("judge", response="..."))

Each target is written as one line of JSON (a YAML flow mapping), so any value, a
``${{ VAR }}`` reference included, reaches agentv exactly as given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.fakes import FakeLLMServer
from support.files import write
from support.providers import provider_fields

SCHEMA = "agentv-targets-v2.2"


def targets_text(*targets: Mapping[str, Any]) -> str:
    """The text of a targets file listing ``targets`` in order."""
    lines = "".join(f"  - {json.dumps(dict(target))}\n" for target in targets)
    return f"$schema: {SCHEMA}\ntargets:\n{lines}"


def write_targets(root: Path, *targets: Mapping[str, Any]) -> Path:
    """Write ``root/.agentv/targets.yaml`` listing ``targets`` (each a mapping of one
    target's fields, ``name`` and ``provider`` included) and return its path."""
    return write(root, ".agentv/targets.yaml", targets_text(*targets))


def lm_target(
    kind: str, server: FakeLLMServer, name: str = "default", **fields: Any
) -> dict[str, Any]:
    """A target of LM API ``kind`` named ``name``, aimed at ``server`` with the test keys
    and fast retries (``support.providers.provider_fields``); ``fields`` add or override."""
    return {"name": name, "provider": kind, **provider_fields(kind, server, **fields)}


def openai_target(url: str, name: str = "default", **fields: Any) -> dict[str, Any]:
    """An OpenAI target named ``name`` at ``url`` (a server's root, ``/v1`` added) with
    model ``m`` and key ``k-12345678``, the SDK's own retry settings; ``fields`` add or
    override (an ``api_key`` that is a ``${{ VAR }}`` reference, ``max_retries``...)."""
    return {
        "name": name,
        "provider": "openai",
        "base_url": f"{url}/v1",
        "api_key": "k-12345678",
        "model": "m",
        **fields,
    }


def mock_target(name: str = "default", **fields: Any) -> dict[str, Any]:
    """A mock target named ``name`` (``response``, ``delay_ms``... in ``fields``)."""
    return {"name": name, "provider": "mock", **fields}
