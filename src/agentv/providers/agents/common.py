"""Pieces shared by the agent targets: file lists, the pre-read prompt document, settings
field types, secret redaction for what is recorded, errors for a failed program, and
file-name-safe labels."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, AliasChoices, BeforeValidator
from pydantic_core import PydanticCustomError

from agentv.errors import AgentProcessError, ProviderError, ProviderTimeout
from agentv.system.env import run_environment

if TYPE_CHECKING:
    from agentv.system.process import ProcessResult

USER_QUERY_HEADER = "[[ ## user_query ## ]]"

# --- setup checks (``ProviderSettings.setup_warnings``) ---------------------------------------


def pending(raw: str | None) -> bool:
    """True for a value still holding a ``${{ VAR }}`` reference: it is only known when the
    target runs (``validate`` never reads the environment), so it cannot be checked here."""
    return raw is not None and "${{" in raw


def missing_folder(raw: str | None, what: str) -> list[str]:
    """``["<what> '<raw>' does not exist"]`` when ``raw`` names no folder, else nothing."""
    if raw and not pending(raw) and not Path(raw).expanduser().is_dir():
        return [f"{what} '{raw}' does not exist"]
    return []


# --- settings field types ---------------------------------------------------------------


def _blank_to_none(value: Any) -> Any:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return value


def _positive_seconds(value: float | None) -> float | None:
    if value is not None and not value > 0:
        raise PydanticCustomError("timeout", "must be greater than zero seconds")
    if value is not None and not math.isfinite(value):
        raise PydanticCustomError("timeout", "must be a finite number of seconds")
    return value


def _variable_names(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(
        isinstance(item, str) and item.strip() for item in value
    ):
        raise PydanticCustomError(
            "inherit_env", "must be a list of variable names or patterns (such as LC_*)"
        )
    return [item.strip() for item in value]


#: an optional string; blank means "not set"
OptionalText = Annotated[str | None, BeforeValidator(_blank_to_none)]
#: ``inherit_env``: the variables a program inherits (names or ``*`` patterns), or not set:
#: everything but the vendors' keys (``agentv.system.env.child_environment``)
InheritEnv = Annotated[tuple[str, ...] | None, BeforeValidator(_variable_names)]
INHERIT_ENV_ALIASES = AliasChoices("inherit_env", "inheritEnv")
#: ``timeout_seconds``: a positive number of seconds, or not set
TimeoutSeconds = Annotated[
    float | None, BeforeValidator(_blank_to_none), AfterValidator(_positive_seconds)
]


def combined_timeout(*values: float | None) -> float | None:
    """The smallest of the limits that are set (a target's own and the run's), or None."""
    set_values = [v for v in values if v is not None and v > 0]
    return min(set_values) if set_values else None


# --- files --------------------------------------------------------------------------------


def unique_paths(*groups: Iterable[Path | str]) -> list[Path]:
    """Absolute paths, first-seen order, duplicates dropped."""
    seen: set[Path] = set()
    out: list[Path] = []
    for group in groups:
        for item in group:
            path = Path(item).absolute()
            if path not in seen:
                seen.add(path)
                out.append(path)
    return out


def file_uri(path: Path) -> str:
    """``file://`` URI of an absolute path (percent-encoded, so odd names stay one link)."""
    return Path(path).absolute().as_uri()


def _link(path: Path) -> str:
    # Keep the link on one line and its text inside the brackets, whatever the file is called.
    label = " ".join(path.name.splitlines())
    label = label.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return f"* [{label}]({file_uri(path)})"


def _file_block(title: str, files: Sequence[Path]) -> list[str]:
    lines = [title, *(_link(p) for p in files)]
    lines[-1] += "."
    return lines


def preread_document(
    question: str,
    guideline_files: Sequence[Path],
    other_files: Sequence[Path],
    *,
    files_label: str,
) -> str:
    """The prompt an agent target receives: which files to read first, then the question.

    ``files_label`` names the non-guideline files (``input`` for Codex, ``attachment`` for
    VS Code). Without any file the document is just the user-query section.
    """
    lines: list[str] = []
    if guideline_files:
        lines += _file_block("Read all guideline files:", guideline_files)
    if other_files:
        lines += _file_block(f"Read all {files_label} files:", other_files)
    if lines:
        lines += [
            "If any file is missing, fail with ERROR: missing-file <filename> and stop.",
            "Then apply system_instructions on the user query below.",
            "",
        ]
    lines += [USER_QUERY_HEADER, "", question.strip()]
    return "\n".join(lines).strip()


# --- what gets recorded ---------------------------------------------------------------------

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_MIN_SECRET_LEN = 6  # shorter values are too likely to be ordinary words
REDACTED = "***"


def secret_values(*envs: Mapping[str, str]) -> list[str]:
    """Values of credential-looking variables (``*_KEY``, ``*TOKEN*``...) in the run's
    environment (``agentv.system.env``) and in ``envs``, longest first, for ``redact``."""
    values: set[str] = set()
    for env in (run_environment(), *envs):
        for name, value in env.items():
            if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET_LEN:
                values.add(value)
    return sorted(values, key=len, reverse=True)


def redact(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (strings, lists, dicts) with every secret replaced by ``***``."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list | tuple):
        return [redact(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    return value


# --- a program that did not succeed ------------------------------------------------------

#: characters of a failed program's output quoted in its error message
DETAIL_IN_MESSAGE = 1500


def describe_failure(
    what: str, result: ProcessResult, timeout: float | None, secrets: Sequence[str] = ()
) -> str:
    """``<what> timed out after 30s``, or ``<what> exited with code 2: <the end of its stderr,
    else of its stdout>`` (secrets masked before the end is cut)."""
    if result.timed_out:
        return f"{what} timed out" + (f" after {math.ceil(timeout)}s" if timeout else "")
    detail = result.stderr_tail(DETAIL_IN_MESSAGE, secrets) or result.stdout_tail(
        DETAIL_IN_MESSAGE, secrets
    )
    message = f"{what} {result.describe_exit()}"
    return f"{message}: {detail}" if detail else message


def process_failure(
    target: str, what: str, result: ProcessResult, timeout: float | None, secrets: Sequence[str]
) -> ProviderError:
    """The error for target ``target`` whose program (``what``) timed out or failed, with
    every secret redacted (before any text is cut)."""
    message = redact(describe_failure(what, result, timeout, secrets), secrets)
    if result.timed_out:
        return ProviderTimeout(target, message)
    return AgentProcessError(
        target,
        message,
        exit_code=result.exit_code,
        stderr_tail=result.stderr_tail(2000, secrets),
    )


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_label(text: str, fallback: str) -> str:
    """``text`` usable in a file name: runs of other characters become ``_``."""
    return _UNSAFE.sub("_", text) or fallback


def normalise_newlines(text: str) -> str:
    """CRLF to LF."""
    return text.replace("\r\n", "\n")


def argument_list(value: Any) -> tuple[str, ...]:
    """An agent target's extra ``args``, checked: a list of non-empty strings (numbers
    written as such are taken as their text), each stripped; None gives none.

    Args:
        value: What the targets file holds under ``args``.

    Raises:
        PydanticCustomError: When it is not such a list (pydantic locates the error).
    """
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise PydanticCustomError(
            "args", "must be a list of strings, one command-line argument each"
        )
    items = []
    for item in value:
        if isinstance(item, int | float) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str) or not item.strip():
            raise PydanticCustomError("args", "every argument must be a non-empty string")
        items.append(item.strip())
    return tuple(items)
