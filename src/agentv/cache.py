"""``--cache``: answers stored on disk, keyed by the target and the exact request sent.

A second run with the same target settings and the same prompts makes no request at all.
Secrets are never part of what is stored, and they are left out of the key as well.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from agentv.messages import chat_to_dicts
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, Usage

_SECRET_WORDS = ("key", "token", "secret", "password")


def _public_settings(provider: Provider) -> dict[str, Any]:
    data = provider.settings.model_dump(mode="json")
    return {k: v for k, v in data.items() if not any(w in k.lower() for w in _SECRET_WORDS)}


def cache_key(provider: Provider, request: ProviderRequest) -> str:
    """SHA-256 over the target (kind, name, settings without secrets) and the request."""
    payload = {
        "provider": provider.id,
        "settings": _public_settings(provider),
        "eval_id": request.eval_id,
        "question": request.question,
        "guidelines": request.guidelines,
        "messages": chat_to_dicts(request.messages),
        "input_files": [str(p) for p in request.input_files],
        "guideline_paths": [str(p) for p in request.guideline_paths],
        "model": request.model,
    }
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


class ResponseCache:
    """One JSON file per cached answer under ``folder`` (``.agentv/cache`` by default)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> ProviderResponse | None:
        """The stored answer, or None (also when the entry is unreadable)."""
        try:
            data = orjson.loads(self._path(key).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        usage = data.get("usage")
        return ProviderResponse(
            text=data["text"],
            reasoning=data.get("reasoning"),
            usage=Usage(**usage) if isinstance(usage, dict) else None,
            latency_ms=data.get("latency_ms"),
            raw=data.get("raw"),
            sent=data.get("sent") or {},
            attempts=0,  # nothing was sent for it this time
        )

    def put(self, key: str, response: ProviderResponse) -> None:
        """Store an answer atomically (write to a temporary name, then rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "text": response.text,
            "reasoning": response.reasoning,
            "usage": asdict(response.usage) if response.usage else None,
            "latency_ms": response.latency_ms,
            "raw": response.raw,
            "sent": response.sent,
        }
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps(data, default=str))
        os.replace(tmp, path)


class CachedProvider:
    """A target whose answers come from the cache when it has them (``--cache`` on judge
    targets: a rerun asks the judge nothing it was asked before). Everything but
    ``invoke`` is the wrapped provider's."""

    def __init__(self, provider: Provider, cache: ResponseCache, on_hit: Callable[[], None]):
        self._provider = provider
        self._cache = cache
        self._on_hit = on_hit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """The cached answer to ``request``, else the provider's (then stored)."""
        key = cache_key(self._provider, request)
        hit = self._cache.get(key)
        if hit is not None:
            self._on_hit()
            return hit
        response = await self._provider.invoke(request)
        self._cache.put(key, response)
        return response
