"""What every LM API provider shares: common settings, the retry loop, error wording.

A vendor adapter (``openai.py``, ``anthropic.py``, ``gemini.py``) only says how to map the
request's finished messages to its wire shape, how to call its SDK, how to read the answer,
and how its SDK's exceptions map onto ``ProviderError``. The messages themselves are built
before, in one place (``agentv.prompts.builder``, docs/prompt-rules.md). This module does the rest,
the same way for every vendor:

- retries with exponential backoff and jitter on the configured status codes and on
  connection errors, honouring ``Retry-After`` up to ``retry_max_delay_ms`` (a server that
  asks for longer fails the request at once, as rate limited); never on 400/401/403/404.
  An empty answer is an error, retried once. The SDKs' own retries are turned off by each
  adapter so that these settings mean what they say;
- a per-request timeout: the smaller of the target's ``timeout_seconds`` and the request's
  own limit (the run's ``--agent-timeout``), covering connecting, waiting for the headers
  and reading the body; a retry's wait never runs past the request's own limit;
- one-line errors naming the target, the HTTP status and the API's message (the server's
  reason kept: a long message is shortened from the middle, after known secrets are masked,
  never the key), or why no answer came (refused, reset, DNS, TLS, timeout) with the URL;
- bounded answers: each adapter's SDK gets ``transport.http_client``, which reads at most
  ``max_response_bytes`` of a body (as received and decompressed); a larger one fails the
  request at once, never retried.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import AliasChoices, Field, field_validator

from agentv.errors import ProviderError, ProviderHTTPError, ProviderTimeout, SetupError
from agentv.messages import ChatMessage, ToolCall
from agentv.providers.base import (
    DEADLINE,
    SENDING,
    THROTTLE_STATUSES,
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderSettings,
    Usage,
)
from agentv.providers.failures import connection_failure, rejected_response
from agentv.system.env import run_environment
from agentv.system.masking import shorten

#: The original AgentV's documented defaults (docs/architecture.md, "Compatibility").
DEFAULT_RETRY_STATUS_CODES: tuple[int, ...] = (500, 408, 429, 502, 503, 504)
#: retries of a failed request (a 429, a 5xx, a lost connection) before giving up
DEFAULT_MAX_RETRIES = 6
#: Client errors that a retry cannot fix, whatever ``retry_status_codes`` says.
NEVER_RETRY: frozenset[int] = frozenset({400, 401, 403, 404})
#: client errors a retry may fix (timeout, conflict, too early, too many requests); any
#: other 4xx is an answer about the request itself and is never retried
RETRYABLE_CLIENT_ERRORS: frozenset[int] = frozenset({408, 409, 425, 429})
#: Per-request timeout when neither the target nor the request sets one (the SDKs' default).
DEFAULT_TIMEOUT_SECONDS = 600.0
#: Characters of a body that is not JSON quoted in the error (its start and its end).
NON_JSON_SHOWN = 300
#: The most a response body may hold unless the target says otherwise (``max_response_bytes``).
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
#: Seconds a refused (or failing) connection and an HTTP 500 are tried again for, unless
#: the target sets its own retries: no server is there, or the server says the request
#: itself failed (llama-cpp-python refuses a request it cannot take with a 500); a minute
#: of the long schedule (made for rate limits and overloads) would only delay the error.
QUICK_GIVE_UP_S = 5.0
#: the settings that make a target's retry schedule its own (then it applies as written)
RETRY_SETTINGS = frozenset(
    {"max_retries", "retry_initial_delay_ms", "retry_max_delay_ms", "retry_backoff_factor"}
)
#: What an answer without any text is called in errors (retried once, never cached).
EMPTY_ANSWER = "the API returned an empty answer"
#: Longest API message kept in an error line; a longer one loses its middle (its start says
#: what is wrong, its end often where), after known secrets are masked.
MAX_MESSAGE = 1000


def aliases(*names: str) -> AliasChoices:
    """The spellings a ``targets.yaml`` key may take (snake_case first)."""
    return AliasChoices(*names)


class LLMSettings(ProviderSettings):
    """Fields every LM API target accepts (README, "Targets")."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        validation_alias=aliases("max_output_tokens", "maxOutputTokens", "maxTokens", "max_tokens"),
    )
    system_prompt: str | None = Field(
        default=None, validation_alias=aliases("system_prompt", "systemPrompt")
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES, ge=0, validation_alias=aliases("max_retries", "maxRetries")
    )
    #: requests and tokens a minute this target may take (None: no limit of its own)
    max_rpm: float | None = Field(default=None, gt=0, validation_alias=aliases("max_rpm", "maxRpm"))
    max_tpm: float | None = Field(default=None, gt=0, validation_alias=aliases("max_tpm", "maxTpm"))
    retry_initial_delay_ms: float = Field(
        default=1000,
        ge=0,
        validation_alias=aliases("retry_initial_delay_ms", "retryInitialDelayMs"),
    )
    retry_max_delay_ms: float = Field(
        default=60000, ge=0, validation_alias=aliases("retry_max_delay_ms", "retryMaxDelayMs")
    )
    retry_backoff_factor: float = Field(
        default=2, ge=1, validation_alias=aliases("retry_backoff_factor", "retryBackoffFactor")
    )
    retry_status_codes: tuple[int, ...] = Field(
        default=DEFAULT_RETRY_STATUS_CODES,
        validation_alias=aliases("retry_status_codes", "retryStatusCodes"),
    )
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        validation_alias=aliases("timeout_seconds", "timeoutSeconds"),
    )
    #: the most a response body may hold, as received and decompressed (``transport``)
    max_response_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        ge=1,
        validation_alias=aliases("max_response_bytes", "maxResponseBytes"),
    )

    #: a bound cannot change an answer (only refuse one): old cache entries stay valid
    not_in_cache_key: ClassVar[frozenset[str]] = frozenset({"max_response_bytes"})

    @field_validator("retry_status_codes")
    @classmethod
    def _http_codes(cls, codes: tuple[int, ...]) -> tuple[int, ...]:
        bad = [c for c in codes if not 100 <= c <= 599]
        if bad:
            raise ValueError(f"not HTTP status codes: {', '.join(map(str, bad))}")
        return codes


@dataclass(slots=True)
class Payload:
    """What an adapter will send for one request: the vendor payload, JSON-ready and free
    of secrets (the request's messages in the vendor's shape)."""

    request: dict[str, Any]
    #: the payload's fields that hold the conversation (the rest are its settings)
    conversation: tuple[str, ...] = ("messages",)
    #: the output limit sent: (where in the payload, tokens), e.g. ("max_tokens", 100)
    token_limit: tuple[str, int] | None = None

    def sent(self) -> dict[str, Any]:
        """The record of what was sent, as providers report it (``ProviderResponse.sent``):
        the payload, its settings as sent (model, temperature, the token limit under the
        name it was sent with, and any other parameter) and the token limit on its own."""
        sent: dict[str, Any] = {
            "request": self.request,
            "settings": {k: v for k, v in self.request.items() if k not in self.conversation},
        }
        if self.token_limit is not None:
            param, value = self.token_limit
            sent["token_limit"] = {"param": param, "value": value}
        return sent


@dataclass(slots=True)
class Answer:
    """What an adapter read from a successful response."""

    text: str
    reasoning: str | None = None
    usage: Usage | None = None
    raw: Any = None
    finish_reason: str | None = None  # normalised (``FINISH_REASONS``)
    finish_reason_raw: str | None = None  # the API's own word
    tool_calls: tuple[ToolCall, ...] = ()


def pick(first: float | None, then: float | None) -> float | None:
    """``first`` unless it is None (a request's own setting over its target's)."""
    return first if first is not None else then


def finish_reason(raw: Any, words: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(normalised, raw)`` for the API's word ``raw``: ``words`` maps the API's words to
    ``FINISH_REASONS``; any other word is ``other`` (and kept as the raw value)."""
    raw = getattr(raw, "value", raw)  # an SDK's enum: its wire value
    if not isinstance(raw, str) or not raw:
        return None, None
    return words.get(raw, "other"), raw


class NotJSON(Exception):
    """A success whose body is not JSON (an HTML page from a proxy, say); ``what`` says
    what it is not (``not JSON``, or ``not UTF-8 (byte 0xe9 at position 42)``: JSON is
    UTF-8 text)."""

    def __init__(self, body: str, what: str = "not JSON") -> None:
        super().__init__(f"the API answered with a body that is {what}")
        self.body = body
        self.what = what


def not_json(content: bytes) -> NotJSON:
    """Why ``content`` (a body that did not parse as JSON) is not JSON, as ``NotJSON``:
    bytes that are not UTF-8 are said to be so, with the first one and where it is."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        what = f"not UTF-8 (byte 0x{content[exc.start]:02x} at position {exc.start})"
        return NotJSON(content.decode("utf-8", errors="replace"), what)
    return NotJSON(text)


def _not_json(exc: BaseException) -> tuple[str, str] | None:
    """The body behind ``exc`` and what it is not (see ``NotJSON``), when it is the failure
    to read a body as JSON (ours, or the JSON error an SDK let through, which keeps the
    document)."""
    node: BaseException | None = exc
    for _ in range(10):
        if node is None:
            break
        if isinstance(node, NotJSON):
            return node.body, node.what
        if isinstance(node, json.JSONDecodeError) and isinstance(node.doc, str):
            return node.doc, "not JSON"
        node = node.__cause__ or node.__context__
    return None


@dataclass(slots=True)
class CallFailure:
    """A vendor error after translation: what to say, and whether a retry may help."""

    message: str
    status: int | None = None
    retry_after: float | None = None
    connection: bool = False  # no HTTP answer at all (refused, reset, DNS)
    timeout: bool = False
    empty: bool = False  # a success without any answer text


class LLMProvider(Provider):
    """Base of the LM API providers. Subclasses implement the three vendor hooks."""

    Settings: ClassVar[type[ProviderSettings]] = LLMSettings
    settings: LLMSettings
    #: the key the SDK was given (the target's, or the vendor variable's); set by adapters
    api_key_in_use: str | None = None

    # --- vendor hooks ------------------------------------------------------------------

    @abstractmethod
    def build_payload(self, request: ProviderRequest) -> Payload:
        """The vendor payload for ``request.messages``: a mapping, never a change of content
        (the vendor's merging of consecutive turns aside)."""

    @abstractmethod
    async def call(self, payload: Payload, timeout: float) -> Answer:
        """Send ``payload`` once through the SDK; let SDK exceptions propagate."""

    @abstractmethod
    def translate_error(self, exc: BaseException) -> CallFailure | None:
        """Turn one of the SDK's exceptions into a ``CallFailure`` (None: not an API error)."""

    # --- shared behaviour --------------------------------------------------------------

    def http_client(self) -> Any:
        """The HTTP client for this target's SDK: bodies bounded by ``max_response_bytes``
        (imported here: httpx2 comes with the SDKs)."""
        from agentv.providers.transport import http_client

        return http_client(self.settings.max_response_bytes)

    def model_for(self, request: ProviderRequest) -> str:
        """The model to ask: the request's (a judge's ``model``) or the target's."""
        return request.model or str(getattr(self.settings, "model", "") or "")

    def timeout_for(self, request: ProviderRequest) -> float:
        """Seconds allowed for one request (connect, headers and body): the smaller of the
        target's ``timeout_seconds`` and the request's limit (the case's ``--agent-timeout``,
        which also bounds the whole call, retries included), whichever are set; else 600."""
        limits = [t for t in (request.timeout, self.settings.timeout_seconds) if t and t > 0]
        return min(limits) if limits else DEFAULT_TIMEOUT_SECONDS

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The vendor payload ``invoke`` would send, itself (``render`` shows it as the
        case's ``request``); nothing is called."""
        return self.build_payload(request).request

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        payload = self.build_payload(request)
        timeout = self.timeout_for(request)
        started = time.perf_counter()
        # Latency is what the case waited for its answer, retries and their waits included.
        answer, attempts = await self._with_retries(payload, timeout, request.timeout)
        return ProviderResponse(
            text=answer.text,
            reasoning=answer.reasoning,
            usage=answer.usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            raw=answer.raw,
            sent=payload.sent(),
            attempts=attempts,
            finish_reason=answer.finish_reason,
            finish_reason_raw=answer.finish_reason_raw,
            tool_calls=answer.tool_calls,
        )

    async def _with_retries(
        self, payload: Payload, timeout: float, budget: float | None = None
    ) -> tuple[Answer, int]:
        """The answer and how many requests it took. Each request gets ``timeout`` seconds;
        ``budget`` (the request's own limit, when set) bounds the waits between them."""
        attempts = self.settings.max_retries + 1
        deadline = None if not budget else time.monotonic() + budget
        throttle = self.throttle
        sending = None if throttle is None else SENDING.set(lambda: throttle.left(throttle.now()))
        try:
            return await self._attempts(payload, timeout, attempts, deadline)
        finally:
            if sending is not None:
                SENDING.reset(sending)

    async def _attempts(
        self, payload: Payload, timeout: float, attempts: int, deadline: float | None
    ) -> tuple[Answer, int]:
        empty_answers = 0
        started = time.monotonic()
        told = DEADLINE.get()  # the gate's limit, for this very task only
        outer = told[1] if told is not None and told[0] is asyncio.current_task() else None
        loop = asyncio.get_running_loop()
        for attempt in range(attempts):
            sent_at = self.throttle.now() if self.throttle is not None else 0.0
            try:
                if outer is not None and outer <= loop.time() + timeout:
                    # the run's limit on the whole call ends first: it alone is timed (one
                    # timer less per request; this one could never fire first)
                    answer = await self.call(payload, timeout)
                else:
                    async with asyncio.timeout(timeout):
                        answer = await self.call(payload, timeout)
                if answer.text.strip() or answer.tool_calls:  # tool calls are an answer too
                    if self.throttle is not None:
                        self.throttle.succeeded(sent_at)
                    return answer, attempt + 1
                # Nothing to grade, and nothing worth caching: an error, retried once.
                empty_answers += 1
                why = EMPTY_ANSWER
                if answer.finish_reason not in (None, "stop"):
                    why += f" (finish_reason: {answer.finish_reason_raw})"
                failure = CallFailure(why, empty=True)
            except ProviderError:
                raise
            except Exception as exc:
                failure = self._failure(exc, timeout)
            last = attempt == attempts - 1
            if failure.timeout:
                # Timeouts are retried per case by the run (--max-retries), not here:
                # retrying a hung request inside the provider would multiply the wait.
                error = ProviderTimeout(self.name, self._line(failure))
                error.attempts = attempt + 1
                raise error from None
            delay = self._delay(attempt, failure.retry_after)
            if self.throttle is not None and failure.status in THROTTLE_STATUSES:
                # the whole target slows down and waits, not just this request; also when
                # this request is not retried (its last attempt, or a wait longer than
                # allowed): the next cases would only meet the same refusal
                asked = failure.retry_after is not None
                self.throttle.throttled(delay, sent_at=sent_at, asked=asked)
            if failure.empty:
                if last or empty_answers > 1:
                    raise self._error(failure, attempt + 1) from None
            elif last or not self._retryable(failure):
                raise self._error(failure, attempt + 1) from None
            too_long = self._too_long(failure, deadline)
            if too_long is not None:
                raise self._error(failure, attempt + 1, too_long) from None
            quick = self._quick_give_up(failure)
            if quick is not None and time.monotonic() - started + delay > QUICK_GIVE_UP_S:
                over = time.monotonic() - started
                raise self._error(failure, attempt + 1, quick, over=over) from None
            if deadline is not None and time.monotonic() + delay >= deadline:
                # No time left to retry within the request's limit: say what went wrong,
                # rather than let the wait end as a timeout.
                raise self._error(failure, attempt + 1) from None
            if self.on_retry is not None:
                status = 200 if failure.empty else failure.status
                self.on_retry(self.name, status, delay)
            if self.throttle is None:
                await asyncio.sleep(delay)
            else:
                # the wait holds no turn at the target (other cases use it meanwhile; a 500
                # is no sign of load, so the target's limit stays), then the retry queues
                # again: after the target's pause, within its (maybe lowered) limit, so
                # retries never stampede a limited server
                await self.throttle.requeue(after=delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _too_long(self, failure: CallFailure, deadline: float | None) -> str | None:
        """Why the wait the server asked for is not waited (None: it is)."""
        asked = failure.retry_after
        if asked is None:
            return None
        what = "rate limited: " if failure.status == 429 else ""
        cap = self.settings.retry_max_delay_ms / 1000
        if asked > cap:
            return (
                f"{what}the server asked to wait {asked:g} s, more than retry_max_delay_ms "
                f"allows ({cap:g} s)"
            )
        if deadline is not None and time.monotonic() + asked >= deadline:
            return (
                f"{what}the server asked to wait {asked:g} s, more than is left of the "
                f"request's time limit"
            )
        return None

    @property
    def url(self) -> str:
        """Where the requests go (without credentials), for messages."""
        return str(getattr(self, "_url", "") or "the API")

    def _failure(self, exc: BaseException, timeout: float) -> CallFailure:
        if isinstance(exc, TimeoutError):
            return CallFailure(f"no answer within {timeout:g} s from {self.url}", timeout=True)
        found = _not_json(exc)
        if found is not None:
            body, what = found
            # its start and its end, masked before the middle is cut out
            shown = shorten(body, NON_JSON_SHOWN, secrets=self._secrets())
            return CallFailure(f"the API answered with a body that is {what}: {shown!r}")
        rejected = rejected_response(exc)
        if rejected is not None:
            # too large, or unreadable: the same request would get the same answer
            return CallFailure(f"{rejected} (from {self.url})")
        failure = self.translate_error(exc)
        if failure is None:
            # A bug or an unexpected response shape: say what it was, on one line.
            failure = CallFailure(f"{type(exc).__name__}: {one_line(str(exc))}")
        return failure

    def no_answer(self, exc: BaseException) -> CallFailure | None:
        """``exc`` as a request that got no HTTP answer (refused, reset, DNS, TLS, a
        timeout), with the URL; None when it is not one."""
        why = connection_failure(exc)
        if why is None:
            return None
        if why.reason.endswith("timed out"):
            return CallFailure(f"{why.reason} ({self.url})", timeout=True)
        return CallFailure(f"cannot reach {self.url}: {why.reason}", connection=why.retry)

    def _retryable(self, failure: CallFailure) -> bool:
        if failure.status is None:
            return failure.connection
        if failure.status in NEVER_RETRY or (
            400 <= failure.status < 500 and failure.status not in RETRYABLE_CLIENT_ERRORS
        ):
            return False
        return failure.status in self.settings.retry_status_codes

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's word (at most
        ``retry_max_delay_ms``), else backoff."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.settings.retry_max_delay_ms / 1000)
        s = self.settings
        base = min(s.retry_max_delay_ms, s.retry_initial_delay_ms * s.retry_backoff_factor**attempt)
        return base / 1000 * random.uniform(0.75, 1.25)

    def _quick_give_up(self, failure: CallFailure) -> str | None:
        """Why ``failure`` is tried again for ``QUICK_GIVE_UP_S`` at most (None: the
        target's whole schedule applies): a connection that fails, or an HTTP 500, while
        the target keeps the default retry settings."""
        if RETRY_SETTINGS & self.settings.model_fields_set:
            return None
        limit = f"{QUICK_GIVE_UP_S:g} s at most"
        advice = "set max_retries on the target to try for longer"
        if failure.connection:
            what = "a refused connection" if "refused" in failure.message else "a failed connection"
            return f"{what} is tried again for {limit}; {advice}"
        if failure.status == 500:
            return (
                f"an HTTP 500 is tried again for {limit} (the server says the request failed: "
                f"its message above says why); {advice}"
            )
        return None

    def _line(self, failure: CallFailure) -> str:
        text = f"target {self.name!r} ({self.kind}): "
        if failure.status is not None:
            text += f"HTTP {failure.status}: "
        # masked before it is shortened: a key crossing the cut must not leave a part behind
        return text + shorten(one_line(failure.message), MAX_MESSAGE, secrets=self._secrets())

    def _error(
        self,
        failure: CallFailure,
        attempts: int,
        why: str | None = None,
        *,
        over: float | None = None,
    ) -> ProviderError:
        text = self._line(failure)
        if over is not None:  # why it stopped, with how long it tried
            text += f" (gave up after {attempts} attempts over {over:.1f} s: {why})"
        else:
            if attempts > 1:
                text += f" (gave up after {attempts} attempts)"
            if why is not None:
                text += f" ({why})"
        if failure.status is not None:
            return ProviderHTTPError(
                self.name,
                text,
                status=failure.status,
                retryable=failure.status not in NEVER_RETRY,
                retry_after=failure.retry_after,
                attempts=attempts,
            )
        return ProviderError(self.name, text, retryable=failure.connection, attempts=attempts)

    def _secrets(self) -> tuple[str, ...]:
        """The keys this target sends (the configured one, or the one from the vendor's
        variable), masked in its messages in case an API or SDK echoes them."""
        keys = (getattr(self.settings, "api_key", None), getattr(self, "api_key_in_use", None))
        return tuple(k for k in keys if isinstance(k, str) and k.strip())


# --- helpers for adapters -------------------------------------------------------------------


def one_line(text: str) -> str:
    """``text`` with its runs of whitespace, newlines included, as single spaces."""
    return " ".join(text.split())


def api_message(body: Any, fallback: str = "") -> str:
    """The human message inside an API error body (OpenAI, Anthropic, Google and FastAPI
    validation shapes), whole and on one line: the provider masks it, then shortens it."""
    node = body
    for _ in range(3):
        if isinstance(node, Mapping):
            inner = node.get("error")
            if isinstance(inner, (Mapping, str)):
                node = inner
                continue
            problems = _validation_problems(node.get("detail"))
            if problems:
                return problems
            for key in ("message", "detail", "error_description"):
                value = node.get(key)
                if isinstance(value, str) and value.strip():
                    return one_line(value)
            break
        if isinstance(node, str) and node.strip():
            return one_line(node)
        break
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str) and body.strip():
        return one_line(body)
    return one_line(fallback) or "no error message"


def _validation_problems(detail: Any) -> str:
    """FastAPI's (and pydantic's) list of problems, ``body.messages.1.content: Input should
    be a valid string; ...`` (empty when ``detail`` is not such a list)."""
    if not isinstance(detail, list):
        return ""
    said = []
    for item in detail:
        if not isinstance(item, Mapping) or not isinstance(item.get("msg"), str):
            return ""
        loc = item.get("loc")
        where = ".".join(str(part) for part in loc) if isinstance(loc, list) else ""
        said.append(f"{where}: {item['msg']}" if where else item["msg"])
    return one_line("; ".join(said))


def retry_after_seconds(headers: Mapping[str, str] | Any) -> float | None:
    """``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date) from response headers."""
    if headers is None:
        return None
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    value = getter("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = getter("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def paired_call_id(message: ChatMessage, called: set[str]) -> str:
    """The id of the earlier call a tool result answers. Prompt building has already turned
    results without one into user turns (docs/prompt-rules.md section 5), so a miss here
    is a request that did not come from ``agentv.prompts.builder``."""
    if message.tool_call_id is None or message.tool_call_id not in called:
        raise ValueError(
            f"tool result {message.tool_call_id!r} answers no earlier tool call; build the "
            "messages with agentv.prompts.builder, which sends such results as user turns"
        )
    return message.tool_call_id


def json_text(value: Any) -> str:
    """Compact JSON (tool call arguments as OpenAI wants them)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A model's tool call, its arguments read as a JSON object: a JSON text (OpenAI's
    form) or a mapping (Anthropic's, Gemini's). Arguments that are not a JSON object are
    kept as ``{}`` with ``invalid`` saying why, so that the tool can answer the model with
    an error instead of the case failing. A JSON text is also kept as it was written
    (``ToolCall.text``): it goes back to the model unchanged."""
    invalid = None
    text = arguments if isinstance(arguments, str) else None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            invalid = f"the arguments are not valid JSON: {arguments[:200]!r}"
            arguments = {}
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        invalid = invalid or f"the arguments are not a JSON object: {json_text(arguments)[:200]}"
        arguments = {}
    return ToolCall(str(call_id), str(name), arguments, invalid, text)


def http_url(value: Any) -> Any:
    """``value`` (a ``base_url``), checked: an ``http://`` or ``https://`` URL with a host.

    For a settings ``field_validator``: anything else raises ``ValueError`` (without the
    value, which may hold credentials); None and blank text (no URL: the vendor's) pass.
    """
    if not isinstance(value, str) or not value.strip():
        return value
    value = value.strip()
    try:
        parts = urlsplit(value)
        usable = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        usable = False
    if not usable:
        raise ValueError(
            "must be an http:// or https:// URL with a host, such as https://api.example.com/v1"
        )
    return value


def safe_url(url: str | None) -> str:
    """``url`` without credentials or query (both may hold secrets), for messages."""
    if not url:
        return ""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def resolve_api_key(
    provider: Provider,
    configured: str | None,
    env_names: tuple[str, ...],
    *,
    custom_url: bool,
    placeholder: str | None = None,
) -> str:
    """The key to use: the target's, else (for the vendor's own endpoint only) the vendor's
    usual environment variable.

    A target pointing at a custom URL (gateway, proxy, local server) never picks up a vendor
    key from the environment on its own: that key would go to a third party. A local server
    that needs no key gets ``placeholder``.
    """
    if configured and configured.strip():
        return configured.strip()
    if not custom_url:
        env = run_environment()  # the run's own: its .env, never another run's
        for name in env_names:
            value = env.get(name, "").strip()
            if value:
                return value
    if placeholder is not None:
        return placeholder
    example = env_names[0] if env_names else "API_KEY"
    raise SetupError(
        f"target {provider.name!r} ({provider.kind}) has no API key; add "
        f"`api_key: ${{{{ {example} }}}}` to it in targets.yaml and set {example} "
        "in the environment or in .env"
    )


def stainless_failure(
    provider: LLMProvider, sdk: Any, base_error: type, exc: BaseException
) -> CallFailure | None:
    """Read the exceptions of the OpenAI and Anthropic SDKs, which share one design (their
    connection errors, timeouts included, are read from the cause they keep)."""
    if isinstance(exc, sdk.APIStatusError):
        return CallFailure(
            api_message(exc.body, exc.message),
            status=exc.status_code,
            retry_after=retry_after_seconds(exc.response.headers),
        )
    if isinstance(exc, sdk.APIConnectionError):  # APITimeoutError is one too
        failure = provider.no_answer(exc)
        if failure is not None:
            return failure
        if isinstance(exc, sdk.APITimeoutError):
            return CallFailure(f"no answer in time from {provider.url}", timeout=True)
        cause = exc.__cause__ or exc
        return CallFailure(f"cannot reach {provider.url}: {type(cause).__name__}", connection=True)
    if isinstance(exc, base_error):
        return CallFailure(str(exc))
    return None
