"""``--cache``: answers stored on disk, keyed by the target and the exact request sent.

A second run with the same target settings and the same prompts makes no request at all.
Secrets are never part of what is stored, and they are left out of the key as well.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import orjson

from agentv.messages import ToolCall, chat_to_dicts
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderWrapper,
    Usage,
)
from agentv.system.readfile import read_input
from agentv.trajectory import read_transcript, steps_dicts

#: why a reused answer has no trajectory when its entry was written without one
OLD_ENTRY = (
    "the answer came from a --cache entry written before agentv recorded trajectories; "
    "run once without --cache to record it"
)

_SECRET_WORDS = ("key", "token", "secret", "password")
#: the largest entry read back (answers are bounded far below: ``max_response_bytes``,
#: ``max_output_bytes``); anything larger is not what agentv wrote, so a miss
MAX_ENTRY_BYTES = 256 * 1024 * 1024


def _public_settings(provider: Provider) -> dict[str, Any]:
    data = provider.settings.model_dump(
        mode="json", exclude=set(provider.settings.not_in_cache_key)
    )
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
    if request.repeat:
        # each run of a repeated case is its own answer; the first keeps the plain key
        payload["repeat"] = request.repeat
    if request.sample:
        # each sample of a judge is its own answer (a rerun reproduces every one); the
        # first keeps the plain key
        payload["sample"] = request.sample
    if request.tools:  # what the model may call is part of what it was asked
        payload["tools"] = list(request.tools)
    if request.temperature is not None:  # a request's own sampling (a simulated user's)
        payload["temperature"] = request.temperature
    if request.seed is not None:
        payload["seed"] = request.seed
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


class ResponseCache:
    """One JSON file per cached answer under ``folder`` (``.agentv/cache`` by default)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> ProviderResponse | None:
        """The stored answer, or None: a miss also when the entry cannot be read or is not
        the shape ``put`` writes (damaged, hand-edited, a folder, a FIFO, a device or a
        link loop in its place, larger than ``MAX_ENTRY_BYTES``); the next ``put`` replaces
        it. Never raises, never waits."""
        try:
            # a regular file of a sane size only: a FIFO in its place would wait for ever,
            # a link to /dev/zero would never end
            data = orjson.loads(read_input(self._path(key), MAX_ENTRY_BYTES))
            return _response(data)
        except Exception:  # any damage at all is a miss, never a failed case
            return None

    def reuse(
        self, key: str, stored: Callable[[ProviderResponse], ProviderResponse]
    ) -> ProviderResponse | None:
        """``get``, as ``stored`` makes it (the run's secrets masked; ``stored`` returns the
        answer itself when it changes nothing). An entry written before answers were stored
        that way, which still holds a secret, is rewritten so."""
        hit = self.get(key)
        if hit is None:
            return None
        cleaned = stored(hit)
        if cleaned is not hit:
            self.put(key, cleaned)
        return cleaned

    def put(self, key: str, response: ProviderResponse) -> None:
        """Store an answer atomically (write to a temporary name, then rename). An empty
        answer is not stored. Never raises: an entry that cannot be written (a folder in
        its place that cannot be removed, a full disk) is simply not cached."""
        if not response.text and not response.tool_calls:
            return
        path = self._path(key)
        data = {
            "text": response.text,
            "reasoning": response.reasoning,
            "usage": asdict(response.usage) if response.usage else None,
            "latency_ms": response.latency_ms,
            "raw": response.raw,
            "sent": response.sent,
            "finish_reason": response.finish_reason,
            "finish_reason_raw": response.finish_reason_raw,
            "tool_calls": [
                {**call.to_dict(), "invalid": call.invalid, "text": call.text}
                for call in response.tool_calls
            ],
            "trajectory": (
                steps_dicts(response.trajectory) if response.trajectory is not None else None
            ),
            "trajectory_error": response.trajectory_error,
        }
        if response.reported_cost_usd is not None:
            data["reported_cost_usd"] = response.reported_cost_usd
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            _make_folder(path.parent)
            tmp.write_bytes(orjson.dumps(data, default=str))
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # a folder where the entry goes: replace it
            os.replace(tmp, path)
        except Exception:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _make_folder(folder: Path) -> None:
    """``folder`` as a folder, replacing a file in its place."""
    if folder.exists() and not folder.is_dir():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)


def _optional(value: Any, kinds: type | tuple[type, ...]) -> Any:
    if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
        raise TypeError(f"expected {kinds}, got {type(value).__name__}")
    return value


def _response(data: Any) -> ProviderResponse | None:
    """The answer an entry holds, if it is exactly the shape ``put`` writes (else None)."""
    if not isinstance(data, dict):
        return None
    text = data.get("text")
    calls = _tool_calls(data.get("tool_calls"))
    if not isinstance(text, str) or calls is None or not (text or calls):
        return None
    usage = data.get("usage")
    if usage is not None:
        if not isinstance(usage, dict) or set(usage) - _USAGE_FIELDS:
            return None
        said = usage.get("ignored", ())
        if not isinstance(said, list | tuple) or not all(isinstance(n, str) for n in said):
            return None
        counts = {k: _optional(v, int) for k, v in usage.items() if k != "ignored"}
        usage = Usage(**counts, ignored=tuple(said))
    sent = data.get("sent")
    if sent is not None and not isinstance(sent, dict):
        return None
    trajectory, trajectory_error = _trajectory(data)
    return ProviderResponse(
        text=text,
        reasoning=_optional(data.get("reasoning"), str),
        usage=usage,
        latency_ms=_optional(data.get("latency_ms"), (int, float)),
        raw=data.get("raw"),
        sent=sent or {},
        attempts=0,  # nothing was sent for it this time
        cached=True,
        finish_reason=_optional(data.get("finish_reason"), str),
        finish_reason_raw=_optional(data.get("finish_reason_raw"), str),
        tool_calls=calls,
        trajectory=trajectory,
        trajectory_error=trajectory_error,
        reported_cost_usd=_optional(data.get("reported_cost_usd"), (int, float)),
    )


def _trajectory(data: dict[str, Any]) -> tuple[Any, str | None]:
    """The trajectory an entry holds and why there is none (an entry written before
    trajectories were stored has none: said, rather than taken for "no tool called")."""
    if "trajectory" not in data:
        return None, OLD_ENTRY
    error = _optional(data.get("trajectory_error"), str)
    steps = data["trajectory"]
    if steps is None:
        return None, error
    # in-turn numbers are the run's, never stored: the shape `put` writes reads as a transcript
    return read_transcript(steps), error


def _tool_calls(value: Any) -> tuple[ToolCall, ...] | None:
    """The tool calls an entry holds (None: not the shape ``put`` writes)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        return None
    calls = []
    for item in value:
        if not isinstance(item, dict):
            return None
        call_id, name, arguments = item.get("id"), item.get("name"), item.get("arguments")
        invalid, text = item.get("invalid"), item.get("text")
        if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, dict)):
            return None
        if not all(v is None or isinstance(v, str) for v in (invalid, text)):
            return None
        calls.append(ToolCall(call_id, name, arguments, invalid, text))
    return tuple(calls)


_USAGE_FIELDS = frozenset(f.name for f in fields(Usage))


class CachedProvider(ProviderWrapper):
    """A provider whose answers come from the cache when it has them (``--cache``): a rerun
    asks nothing it was asked before, whoever asks (a case's target, a judge). ``stored``
    is what an answer is written as (the run's secrets masked: an answer can quote one);
    ``on_hit`` is told of each request answered from the cache."""

    def __init__(
        self,
        wrapped: Provider,
        cache: ResponseCache,
        *,
        stored: Callable[[ProviderResponse], ProviderResponse],
        on_hit: Callable[[ProviderRequest], None],
    ) -> None:
        super().__init__(wrapped)
        self.cache = cache
        self._stored = stored
        self._on_hit = on_hit

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """The cached answer to ``request`` (``cached`` set), else the wrapped provider's
        (then stored). A request in a workspace is never answered from the cache, nor
        stored: the agent's work is what it leaves in the workspace, not only its answer."""
        if request.workspace is not None:
            return await self.wrapped.invoke(request)
        key = cache_key(self, request)
        hit = self.cache.reuse(key, self._stored)
        if hit is not None:
            self._on_hit(request)
            return hit
        response = await self.wrapped.invoke(request)
        self.cache.put(key, self._stored(response))
        return response
