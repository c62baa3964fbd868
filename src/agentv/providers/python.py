"""Your own Python code as a target (the Python API only): a function that takes the
conversation's messages and returns its answer, so that a run evaluates your application
itself, live conversations and tools included (docs/python-api.md, "Your code as a
target").

The function gets the messages exactly as an LM API would (``chat_to_dicts``: ``role``,
``content``, and ``tool_calls`` / ``tool_call_id`` where set), and, when it takes a
``tools`` keyword, the tools it may call (``{name, description, parameters}``). It returns
the answer's text, or a mapping ``{"text": ..., "tool_calls": [{"name": ..., "arguments":
{...}, "id": ...}]}`` (``id`` optional). It may be a plain function (run in a thread of
its own, so that it does not hold up the other cases) or a coroutine function.

Whatever the function does is its case's, never the run's: an exception of any kind
(``SystemExit`` from ``sys.exit()``, a ``CancelledError`` it raises itself) is that case's
error. A plain function that never returns is left behind when its case's time is up: its
thread is a daemon of its own (never one of a pool that retries would fill, never joined),
so the other cases are still called and ``run_eval`` returns. A coroutine function that
blocks the event loop (``time.sleep``) cannot be stopped at its limit; when it returns
after the limit, its case is a timeout all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from agentv.errors import ProviderError
from agentv.messages import chat_to_dicts
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, ProviderSettings
from agentv.providers.llm import tool_call

#: what a Python target may return: the text, or ``{"text", "tool_calls"}``
Answer = str | dict[str, Any]


@dataclass(frozen=True)
class PythonTarget:
    """A target that is your own code.

    Args:
        fn: Called with each request's messages (``role``, ``content``, and ``tool_calls``
            / ``tool_call_id`` on tool turns); returns the answer's text, or
            ``{"text": ..., "tool_calls": [...]}``. A plain function runs in a worker
            thread; an ``async def`` is awaited. Taking a ``tools`` keyword argument, it
            also gets the tools it may call.
        name: The target's name in results (default: the function's name).
        judge_target: The target in ``targets.yaml`` that judges its answers when a case
            needs a judge.

    Raises:
        TypeError: ``fn`` is not callable.
    """

    fn: Callable[..., Any]
    """The function called with each request's messages."""
    name: str = ""
    """The target's name in results."""
    judge_target: str | None = None
    """The target in ``targets.yaml`` that judges its answers."""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"PythonTarget needs a callable, not {type(self.fn).__name__}")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.fn, "__name__", "python") or "python")


class PythonSettings(ProviderSettings):
    """A Python target has no settings of its own (its code is the target)."""


class PythonProvider(Provider):
    """Calls a ``PythonTarget``'s function with each request's messages."""

    kind = "python"
    Settings: ClassVar[type[ProviderSettings]] = PythonSettings

    def __init__(self, target: PythonTarget) -> None:
        super().__init__(target.name, PythonSettings())
        self.target = target
        self._takes_tools = _takes_keyword(target.fn, "tools")
        self._async = inspect.iscoroutinefunction(target.fn)

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        messages = chat_to_dicts(request.messages)
        kwargs: dict[str, Any] = {"tools": list(request.tools)} if self._takes_tools else {}
        started = time.perf_counter()
        try:
            if self._async:
                said = await self.target.fn(messages, **kwargs)
            else:
                said = await _in_own_thread(self.target.fn, messages, **kwargs)
        except KeyboardInterrupt:
            raise  # the user's Ctrl-C: the run's, not the case's
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this case is being stopped (its time is up, the run is stopping)
            raise self._failed(exc) from exc  # the function's own
        except BaseException as exc:  # sys.exit() too: the case's error
            raise self._failed(exc) from exc
        took = time.perf_counter() - started
        if request.timeout is not None and took > request.timeout:
            # only a coroutine that blocked the event loop gets here: its limit could not
            # fire while it held the loop
            raise ProviderError(
                self.name,
                f"target {self.name!r} took {took:.1f} s, more than the case's limit of "
                f"{request.timeout:g} s: it blocked the event loop (time.sleep, blocking "
                "I/O), so it could not be stopped in time; await instead, or make it a "
                "plain function",
            )
        text, calls = _read(self.name, said)
        return ProviderResponse(
            text=text,
            tool_calls=calls,
            latency_ms=took * 1000,
            sent={"function": _qualified(self.target.fn)},
        )

    def _failed(self, exc: BaseException) -> ProviderError:
        said = str(exc)
        detail = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
        return ProviderError(self.name, f"target {self.name!r} (Python) raised {detail}")


async def _in_own_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread of its own, its outcome awaited here.

    Not ``asyncio.to_thread``: its pool has a few threads, which calls that never return
    would fill (the cases after them timing out without being called), and the loop joins
    them when it closes (``run_eval`` would wait for ever). Cancelling the await leaves the
    thread to end on its own, or never: it does not keep the process alive."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()
    context = contextvars.copy_context()  # as to_thread: the case's context variables

    def settle(outcome: tuple[Any, BaseException | None]) -> None:
        if not done.done():  # not given up on meanwhile
            done.set_result(outcome)

    def call() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (context.run(fn, *args, **kwargs), None)
        except BaseException as exc:  # handed to the awaiting case
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=call, name=f"agentv-python-target-{fn!r:.40}", daemon=True).start()
    result, error = await done
    if error is not None:
        raise error
    return result


def _read(name: str, said: Any) -> tuple[str, tuple[Any, ...]]:
    if isinstance(said, str):
        return said, ()
    if isinstance(said, dict):
        text = said.get("text") or ""
        raw = said.get("tool_calls") or []
        if (
            isinstance(text, str)
            and isinstance(raw, list)
            and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in raw)
        ):
            calls = tuple(
                tool_call(c.get("id") or f"call_{i}", c["name"], c.get("arguments"))
                for i, c in enumerate(raw)
            )
            return text, calls
    raise ProviderError(
        name,
        f"target {name!r} (Python) returned {type(said).__name__}: return the answer's text, "
        'or {"text": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}',
    )


def _takes_keyword(fn: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _qualified(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module else name
