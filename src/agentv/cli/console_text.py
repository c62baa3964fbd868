"""Text from files and agents, made safe to print on a terminal and in a CI log.

Case ids, answers, agents' stderr, messages and paths come from files agentv does not
control. Printed as they are, they could act instead of being shown:

- a terminal acts on control characters (``ESC [2J`` clears the screen, ``ESC ]0;`` sets the
  window's title): each is shown as its escape (``\\x1b``);
- GitHub Actions reads a line that starts with ``::`` (after any blanks) as a workflow
  command (``::error``, ``::add-mask::``, ``::stop-commands::``...), and ``##[`` anywhere
  in a line as one of the older form: the first colon of such a line is shown as ``\\x3a``
  and ``##[`` as ``#\\x23[``, so that no line agentv prints from such text can start one.
  agentv's own annotations (``::error file=...``) are printed apart, never through here;
- a lone surrogate (JSON lets ``"\\ud800"`` through) cannot be encoded for printing at all:
  it is shown as its escape (``\\ud800``).

What agentv writes to files keeps the exact text; only the console gets this.
"""

from __future__ import annotations

import re
from typing import Any

#: characters a terminal may act on rather than show: C0 controls but newline and tab, DEL,
#: and C1 controls (some terminals take U+009B as the start of an escape sequence); and
#: lone surrogates, which no console encoding can write
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
#: the first colon of a line that would start a workflow command (``::`` after blanks)
_COMMAND = re.compile(r"^([^\S\n]*):(?=:)", re.MULTILINE)
#: workflow commands of the older form, matched anywhere in a line
_OLD_COMMAND = "##["
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` safe to print on a terminal and in a CI log (see the module's docstring):
    control characters and lone surrogates shown as escapes, and no line able to start a
    GitHub Actions workflow command."""
    text = _CONTROL.sub(_escape, text)
    if "::" in text:
        text = _COMMAND.sub(r"\1\\x3a", text)
    if _OLD_COMMAND in text:
        text = text.replace(_OLD_COMMAND, "#\\x23[")
    return text


def printable_all(value: Any) -> Any:
    """``value`` with ``printable`` applied to every string inside it (lists, dicts)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_all(k): printable_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_all(v) for v in value]
    return value


def printable_json(text: str) -> str:
    """JSON text (as ``json.dumps`` writes it, indented) safe to print, meaning the same:
    ``##[`` (only ever inside a string) becomes ``#\\u0023[`` and a lone surrogate its
    ``\\uXXXX`` escape. No line of indented JSON starts with ``::``; control characters
    are escaped by ``json.dumps`` itself."""
    if _OLD_COMMAND in text:
        text = text.replace(_OLD_COMMAND, "#\\u0023[")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
