"""The provider contract: ``await provider.invoke(request) -> response``.

A provider is built once per target per run from the target's resolved settings and reused
for every case (one SDK client per target). LM API providers send the chat prompt; agent
providers send the agent-mode question and point at files (docs/prompt-rules.md section 6).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from agentv.messages import ChatMessage, Mode, ToolCall
from agentv.trajectory import Trajectory

if TYPE_CHECKING:
    import asyncio

    from agentv.providers.pricing import TargetPrice
    from agentv.system.sandbox import Sandbox

#: HTTP statuses that mean "too much load": the target's throttle slows it down and pauses it
THROTTLE_STATUSES = frozenset({429, 503, 529})


class Throttle(Protocol):
    """What a provider tells its target's scheduler about the requests it sends: the run's
    gate for that target (``agentv.run.scheduling``, or a cluster-wide one on Ray), set as
    ``Provider.throttle`` when a run starts. See docs/rate-limits.md."""

    def now(self) -> float:
        """The scheduler's clock (when a request goes out, for ``throttled``'s ``sent_at``)."""
        ...

    def succeeded(self, sent_at: float | None = None) -> None:
        """A request sent at ``sent_at`` (None: not known) got its answer: how long answers
        take sets how many requests a paced target keeps in flight."""
        ...

    def throttled(self, wait: float, *, sent_at: float | None = None, asked: bool = False) -> None:
        """The target refused a request sent at ``sent_at`` as too much load
        (``THROTTLE_STATUSES``): wait ``wait`` seconds (``asked``: the server's own word,
        its ``Retry-After``; else a backoff)."""
        ...

    async def requeue(self, tokens: float = 0.0, *, after: float = 0.0) -> None:
        """Give up the request's turn for a retry's wait of ``after`` seconds, then wait for
        a new turn."""
        ...

    def left(self, at: float) -> None:
        """A request left for the target at ``at`` (the scheduler's clock): later than its
        turn, the next turns are spaced from then."""
        ...


#: what a request's transport calls the moment the request leaves (set by the provider
#: for each request; None: nobody asks)
SENDING: ContextVar[Callable[[], None] | None] = ContextVar("agentv_sending", default=None)

#: the task whose call must have ended by when, by the event loop's clock (set by the run's
#: gate for a request with a time limit; None: no such limit): that task's provider need not
#: time its own request as well when the limit comes first. Only that task: a task or a
#: thread started meanwhile inherits the variable, but not the gate's timer.
DEADLINE: ContextVar[tuple[asyncio.Task[Any] | None, float] | None] = ContextVar(
    "agentv_deadline", default=None
)


@dataclass(slots=True)
class ProviderRequest:
    """What a target is asked: the finished messages and the texts and files around them.

    ``messages`` is final (docs/prompt-rules.md): LM API providers send exactly that list,
    mapped to their wire shape; agent providers send ``question`` and point at the files.
    """

    question: str
    messages: list[ChatMessage]
    guidelines: str = ""
    input_files: list[Path] = field(default_factory=list)  # attachments, absolute
    guideline_paths: list[Path] = field(default_factory=list)  # guideline files, absolute
    eval_id: str = ""
    attempt: int = 0
    model: str | None = None  # overrides the target's model (a judge's `model`)
    timeout: float | None = None  # seconds for this call; None: the target's own
    repeat: int = 0  # which run of the case this is (`--repeat`): each is its own request
    #: which of a judge's samples of one answer this is: each is its own request
    sample: int = 0
    #: who asks: the target being evaluated ("candidate"), a judge ("judge") or a
    #: simulated user ("user"); the run counts each party's requests and reused answers apart
    party: str = "candidate"
    #: this request's sampling, over the target's own (a simulated user's): LM APIs send
    #: them where they take them
    temperature: float | None = None
    seed: int | None = None
    #: tools the model may call: ``{name, description, parameters}`` (a JSON Schema); LM
    #: API providers send them natively, other targets have tools of their own
    tools: tuple[dict[str, Any], ...] = ()
    #: the case's workspace (docs/eval-files.md, "Workspaces"): an agent works there, in
    #: ``sandbox`` (None: the target's own folder, on the machine)
    workspace: Path | None = None
    sandbox: Sandbox | None = None


class _Case(Protocol):
    """What a request takes of its case (an ``agentv.cases.EvalCase``)."""

    @property
    def id(self) -> str: ...


class _Prompt(Protocol):
    """What a request takes of a finished prompt (an ``agentv.prompts.builder.Prompt``):
    providers build no prompt."""

    @property
    def question(self) -> str: ...
    @property
    def messages(self) -> list[ChatMessage]: ...
    @property
    def guidelines(self) -> str: ...
    @property
    def input_files(self) -> list[Path]: ...
    @property
    def guideline_paths(self) -> list[Path]: ...


def request_for_case(
    case: _Case,
    prompt: _Prompt,
    *,
    attempt: int = 0,
    timeout: float | None = None,
    repeat: int = 0,
    tools: tuple[dict[str, Any], ...] = (),
    workspace: Path | None = None,
    sandbox: Sandbox | None = None,
) -> ProviderRequest:
    """The request a candidate target gets for one case (one turn of a live one), in its
    workspace when it has one."""
    return ProviderRequest(
        question=prompt.question,
        messages=prompt.messages,
        guidelines=prompt.guidelines,
        input_files=prompt.input_files,
        guideline_paths=prompt.guideline_paths,
        eval_id=case.id,
        attempt=attempt,
        timeout=timeout,
        repeat=repeat,
        tools=tools,
        workspace=workspace,
        sandbox=sandbox,
    )


#: the most tokens one request may count: a server saying more reports no count it means
MAX_TOKENS = 10**12


@dataclass(slots=True)
class Usage:
    """Token counts as the API reported them. ``cached_input_tokens`` are the input tokens
    the vendor read from its own prompt cache (billed at a lower price), counted within
    ``input_tokens``.

    Only counts are kept: a whole number from 0 to ``MAX_TOKENS`` (``12.0`` reads as 12).
    Anything else a server put there (a negative number, text, ``1e308``) is left out and
    said in ``ignored`` (``"output_tokens: -5"``): such an answer is not priced, and it
    never fails its case."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_input_tokens: int | None = None
    ignored: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        ignored = list(self.ignored)
        for name in _USAGE_NAMES:
            value = getattr(self, name)
            if value is None:
                continue
            count = _count(value)
            if count is None:
                ignored.append(f"{name}: {_shown(value)}")
            setattr(self, name, count)
        self.ignored = tuple(ignored)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_input_tokens:
            out["cached_input_tokens"] = self.cached_input_tokens
        if self.ignored:
            out["ignored"] = list(self.ignored)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Usage | None:
        """A usage as a record holds it (``to_dict``); None when it is not one."""
        if not isinstance(data, dict):
            return None
        values = {}
        for name in _USAGE_NAMES:
            value = data.get(name)
            values[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
        said = data.get("ignored")
        ignored = tuple(n for n in said if isinstance(n, str)) if isinstance(said, list) else ()
        return cls(**values, ignored=ignored)


_USAGE_NAMES = ("input_tokens", "output_tokens", "total_tokens", "cached_input_tokens")


def _count(value: object) -> int | None:
    """``value`` as a token count (None: it is not one)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_TOKENS else None


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def total_usage(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of several calls' usages, field by field (None where no call reported the
    field; None for no usage at all)."""
    found = [u for u in usages if u is not None]
    if not found:
        return None
    total = Usage(ignored=tuple(note for u in found for note in u.ignored))
    for name in _USAGE_NAMES:
        values = [getattr(u, name) for u in found if getattr(u, name) is not None]
        setattr(total, name, sum(values) if values else None)
    return total


#: how an answer ended, in the same words for every API (``finish_reason`` in results):
#: it was complete, cut at the output token limit, a request for tool calls, withheld or
#: cut by the vendor's content filter, or anything else (the API's own word says what)
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "other")


@dataclass(slots=True)
class ProviderResponse:
    """A target's answer and what it took to get it."""

    text: str
    reasoning: str | None = None
    usage: Usage | None = None
    latency_ms: float | None = None
    raw: Any = None  # the API's response as JSON-able data
    #: exactly what was sent (no secrets); LM API targets: ``request`` (the vendor payload),
    #: ``settings`` (its parameters besides the conversation) and, when a limit was sent,
    #: ``token_limit`` (``{"param": ..., "value": ...}``)
    sent: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1  # requests it took (the provider's own retries included)
    cached: bool = False  # reused from ``--cache``: nothing was sent for it this time
    tool_calls: tuple[ToolCall, ...] = ()  # the tools the model called, in its order
    finish_reason: str | None = None  # one of FINISH_REASONS; None: the target does not say
    finish_reason_raw: str | None = None  # the API's own word for it
    #: US dollars of ``usage`` at the target's price, set by the run (None: unknown)
    cost_usd: float | None = None
    #: US dollars the target itself says the answer cost (an agent that prices its own
    #: calls, across the models it used: Claude Code); the run takes it unless the target
    #: has a ``price:`` of its own
    reported_cost_usd: float | None = None
    #: the tools the target called on its own while answering, in order (an agent's:
    #: Codex's event stream, a command line's {TRAJECTORY_FILE}); a model target calls
    #: none of its own (its ``tool_calls`` are answered by the run). None: the target
    #: cannot say, ``trajectory_error`` saying why when it should have been able to
    trajectory: Trajectory | None = ()
    trajectory_error: str | None = None

    @property
    def token_limit_ignored(self) -> bool:
        """More output tokens came back than the limit sent: the server did not honour the
        limit (an OpenAI-compatible server that does not know the parameter's name)."""
        limit = self.sent.get("token_limit")
        value = limit.get("value") if isinstance(limit, dict) else None
        used = self.usage.output_tokens if self.usage is not None else None
        return isinstance(value, int) and isinstance(used, int) and used > value


#: told of each retry a provider is about to make: (target name, HTTP status or None for a
#: connection failure, seconds it waits first)
RetryListener = Callable[[str, int | None, float], None]


class ProviderSettings(BaseModel):
    """Base of each provider's ``targets.yaml`` fields (snake_case, camelCase aliases accepted)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    #: fields naming a file or folder: a relative value starts from the project folder
    #: (the targets file's, see ``agentv.targets``); a nested model declares its own
    path_fields: ClassVar[frozenset[str]] = frozenset()
    #: fields that, when unset, name a path under the run's folder (``agentv eval``'s
    #: working directory, ``run_eval``'s ``cwd``): field -> path relative to that folder
    run_folder_defaults: ClassVar[Mapping[str, str]] = MappingProxyType({})
    #: fields that cannot change an answer (where logs go): left out of `--cache` keys, so
    #: that they do not split the cache by the folder a run starts from
    not_in_cache_key: ClassVar[frozenset[str]] = frozenset()

    def setup_warnings(self, target: str, kind: str) -> list[str]:
        """What would stop target ``target`` (of provider ``kind``) on this machine, each
        said with how to fix it: a program that is not installed, a folder that does not
        exist. Nothing is run and the environment is not read (``agentv validate``): a
        value still holding ``${{ VAR }}`` is not checked. None by default."""
        return []


class Provider(ABC):
    """A target that answers requests. Subclasses set ``kind`` and ``Settings``."""

    kind: ClassVar[str]
    Settings: ClassVar[type[ProviderSettings]] = ProviderSettings
    #: agent providers read files from disk and get the agent-mode question
    is_agent: ClassVar[bool] = False
    supports_batch: ClassVar[bool] = False
    #: the API rejects a conversation without a user turn (docs/prompt-rules.md section 6)
    needs_user_turn: ClassVar[bool] = False
    #: what ``artifacts`` holds, as the run's summary names it
    artifacts_label: ClassVar[str] = "Logs"
    #: it runs where a case's workspace is (``ProviderRequest.workspace``): an agent or a
    #: command line; a model API has no folder to work in
    works_in_workspace: ClassVar[bool] = False

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        self.settings = settings
        #: the run's listener for retries (so they are visible, not silent)
        self.on_retry: RetryListener | None = None
        #: the run's scheduler for this target: told of throttling and successes, and
        #: waited on before a retry (None: no run is using it)
        self.throttle: Throttle | None = None
        #: the target's ``price:`` from targets.yaml (None: looked up by its API and model,
        #: ``agentv.providers.pricing``)
        self.price: TargetPrice | None = None
        self._artifacts: list[Path] = []

    @property
    def id(self) -> str:
        """``kind:name``, how judges and caches name a target."""
        return f"{self.kind}:{self.name}"

    @property
    def mode(self) -> Mode:
        """Which rendering of the question this target gets (docs/prompt-rules.md)."""
        return "agent" if self.is_agent else "lm"

    @property
    def system_prompt(self) -> str | None:
        """The target's configured ``system_prompt``, when it says anything."""
        value = getattr(self.settings, "system_prompt", None)
        return value if isinstance(value, str) and value.strip() else None

    def concurrency_limit(self, batching: bool) -> int | None:
        """The most cases this target can take at once, whatever ``workers`` says (None:
        no limit of its own). ``batching``: the target's cases go in one dispatch."""
        return None

    @property
    def reports_trajectory(self) -> bool:
        """Whether the target reports the tools it calls on its own (an agent's
        trajectory), so that an answer without a step says "no tool called"."""
        return False

    @property
    def artifacts(self) -> list[Path]:
        """Files the target left for people to read (agent logs), in the order written."""
        return list(self._artifacts)

    def artifacts_after(self, count: int) -> list[Path]:
        """The files kept after the first ``count`` (what a case added)."""
        return self._artifacts[count:]

    def keep_artifact(self, path: Path) -> None:
        """Add a file for the run's closing summary to list (on a Ray run, the driver adds
        the files its workers wrote)."""
        self._artifacts.append(path)

    @abstractmethod
    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """Answer one request. Raise ``ProviderError`` (never a bare SDK error) on failure."""

    async def invoke_batch(self, requests: list[ProviderRequest]) -> list[ProviderResponse]:
        """Answer many requests in one dispatch (only when ``supports_batch``)."""
        raise NotImplementedError(f"{self.kind} targets do not support batching")

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The provider-specific payload ``invoke`` would send, secrets redacted (for render)."""
        return {}

    async def healthcheck(self) -> None:
        """Check once, before the first case, that the target can work; raise ``ProviderError``."""

    async def aclose(self) -> None:
        """Release clients, sessions and temporary folders."""


class ProviderWrapper(Provider):
    """A provider that sends through another one (``wrapped``): a gate, a cache. Only
    ``invoke`` is its own; the target's name, settings, capabilities and everything else
    are the wrapped provider's, so a wrapper stands wherever a provider does. The run wraps
    each target once, the same way whether it answers cases or judges them."""

    def __init__(self, wrapped: Provider) -> None:
        # no state of its own: Provider.__init__ is not called
        self.wrapped = wrapped

    # identity and capabilities: the wrapped provider's
    @property
    def kind(self) -> str:
        return self.wrapped.kind

    @property
    def name(self) -> str:
        return self.wrapped.name

    @property
    def settings(self) -> ProviderSettings:
        return self.wrapped.settings

    @property
    def is_agent(self) -> bool:
        return self.wrapped.is_agent

    @property
    def supports_batch(self) -> bool:
        return self.wrapped.supports_batch

    @property
    def needs_user_turn(self) -> bool:
        return self.wrapped.needs_user_turn

    @property
    def reports_trajectory(self) -> bool:
        return self.wrapped.reports_trajectory

    @property
    def artifacts_label(self) -> str:
        return self.wrapped.artifacts_label

    @property
    def works_in_workspace(self) -> bool:
        return self.wrapped.works_in_workspace

    @property
    def innermost(self) -> Provider:
        """The provider at the bottom of the wrappers (the target itself)."""
        inner = self.wrapped
        while isinstance(inner, ProviderWrapper):
            inner = inner.wrapped
        return inner

    # what the run sets on a provider goes to the wrapped one, which uses it
    @property
    def on_retry(self) -> RetryListener | None:
        return self.wrapped.on_retry

    @on_retry.setter
    def on_retry(self, listener: RetryListener | None) -> None:
        self.wrapped.on_retry = listener

    @property
    def price(self) -> TargetPrice | None:
        return self.wrapped.price

    @price.setter
    def price(self, price: TargetPrice | None) -> None:
        self.wrapped.price = price

    @property
    def throttle(self) -> Throttle | None:
        return self.wrapped.throttle

    @throttle.setter
    def throttle(self, throttle: Throttle | None) -> None:
        self.wrapped.throttle = throttle

    def concurrency_limit(self, batching: bool) -> int | None:
        return self.wrapped.concurrency_limit(batching)

    @property
    def artifacts(self) -> list[Path]:
        return self.wrapped.artifacts

    def artifacts_after(self, count: int) -> list[Path]:
        return self.wrapped.artifacts_after(count)

    def keep_artifact(self, path: Path) -> None:
        self.wrapped.keep_artifact(path)

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        return await self.wrapped.invoke(request)

    async def invoke_batch(self, requests: list[ProviderRequest]) -> list[ProviderResponse]:
        return await self.wrapped.invoke_batch(requests)

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        return self.wrapped.preview(request)

    async def healthcheck(self) -> None:
        await self.wrapped.healthcheck()

    async def aclose(self) -> None:
        await self.wrapped.aclose()
