"""Known secret values, masked wherever agentv writes or forwards text.

A run knows some of its secrets: the value of every ``${{ VAR }}`` its targets substituted,
each target's ``api_key``, and the vendors' key variables (``OPENAI_API_KEY``...). An agent
may still print one (``echo $API_KEY``); its answer then goes to a judge, to code
evaluators, to the results file and to the screen. ``Masker`` replaces each such value with
``***`` in the answer before it is graded, and in the record before it is written or shown;
the record then says so (``masked_secrets: true``). Values shorter than ``MIN_LENGTH`` are
never masked: they are too likely to be ordinary words, and masking them would wreck text.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentv.providers.base import ProviderResponse

MASK = "***"
MIN_LENGTH = 8
#: the variables the LM API providers take a key from when a target has no ``api_key``
VENDOR_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


def vendor_keys(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of the vendors' key variables that are set (in ``env``, else the process
    environment, where ``agentv eval`` has loaded ``.env``)."""
    env = os.environ if env is None else env
    return [value.strip() for name in VENDOR_KEY_VARIABLES if (value := env.get(name, ""))]


class Masker:
    """Replaces known secret values (``MIN_LENGTH`` characters or more) with ``***``."""

    __slots__ = ("_pattern", "secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {s.strip() for s in secrets if isinstance(s, str)}
        #: longest first, so that a secret holding another is masked whole
        self.secrets = tuple(
            sorted((s for s in kept if len(s) >= MIN_LENGTH), key=len, reverse=True)
        )
        self._pattern = re.compile("|".join(map(re.escape, self.secrets))) if self.secrets else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> tuple[str, bool]:
        """``text`` masked, and whether anything was."""
        if self._pattern is None or not text:
            return text, False
        masked, count = self._pattern.subn(MASK, text)
        return masked, count > 0

    def value(self, value: Any) -> tuple[Any, bool]:
        """``value`` (text, or lists and mappings holding text) masked, and whether anything
        was; a value with nothing to mask is returned as it is."""
        if self._pattern is None:
            return value, False
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            changed = False
            for key, item in value.items():
                new_key, key_changed = self.value(key) if isinstance(key, str) else (key, False)
                out[new_key], item_changed = self.value(item)
                changed = changed or key_changed or item_changed
            return (out, True) if changed else (value, False)
        if isinstance(value, list | tuple):
            items = [self.value(item) for item in value]
            if any(changed for _, changed in items):
                return [item for item, _ in items], True
            return value, False
        return value, False

    def response(self, response: ProviderResponse) -> tuple[ProviderResponse, bool]:
        """A target's answer with its text, reasoning, raw data and request masked."""
        if self._pattern is None:
            return response, False
        text, a = self.text(response.text)
        reasoning, b = self.value(response.reasoning)
        raw, c = self.value(response.raw)
        sent, d = self.value(response.sent)
        if not (a or b or c or d):
            return response, False
        masked = dataclasses.replace(response, text=text, reasoning=reasoning, raw=raw, sent=sent)
        return masked, True

    def record(self, record: dict[str, Any]) -> dict[str, Any]:
        """A result record with every secret masked; ``masked_secrets: true`` ends it when
        anything was (an answer masked before grading already says so in the record)."""
        out, changed = self.value(record)
        if changed:
            out = dict(out)
            out.pop("masked_secrets", None)
            out["masked_secrets"] = True
        return out
