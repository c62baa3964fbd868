"""Provider kinds, their aliases, and lazy loading of their modules.

A provider module is imported only when a target of its kind is used, and vendor SDKs are
imported only when a provider is built, so ``agentv --version`` and ``validate`` stay fast
and work without any SDK installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentv.errors import ConfigError, SetupError

if TYPE_CHECKING:
    from agentv.providers.base import Provider

_KINDS: dict[str, str] = {
    "openai": "agentv.providers.openai:OpenAIProvider",
    "azure": "agentv.providers.openai:AzureOpenAIProvider",
    "anthropic": "agentv.providers.anthropic:AnthropicProvider",
    "gemini": "agentv.providers.gemini:GeminiProvider",
    "mock": "agentv.providers.mock:MockProvider",
    "cli": "agentv.providers.agents.cli:CliProvider",
    "codex": "agentv.providers.agents.codex:CodexProvider",
    "claude-code": "agentv.providers.agents.claude_code:ClaudeCodeProvider",
    "vscode": "agentv.providers.agents.vscode:VSCodeProvider",
    "vscode-insiders": "agentv.providers.agents.vscode:VSCodeInsidersProvider",
}

ALIASES: dict[str, str] = {
    "azure-openai": "azure",
    "google": "gemini",
    "google-gemini": "gemini",
    "codex-cli": "codex",
    "claude-cli": "claude-code",
    "openai-compatible": "openai",
}

KINDS: tuple[str, ...] = tuple(_KINDS)


def canonical_kind(name: str) -> str | None:
    """The kind a ``provider:`` value names (case-insensitive, aliases resolved), or None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in _KINDS else None


def provider_class(kind: str) -> type[Provider]:
    """The provider class for a canonical kind (imports its module on first use)."""
    try:
        target = _KINDS[kind]
    except KeyError:
        raise ConfigError(
            f"unknown provider {kind!r}; valid choices: {', '.join(sorted(_KINDS))}"
        ) from None
    module_name, _, cls_name = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, cls_name)


_EXTRAS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google.genai": "gemini",
    "google": "gemini",
}


def require_sdk(module: str, *, target: str, kind: str) -> object:
    """Import a vendor SDK, or fail with the ``pip install`` line that fixes it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = _EXTRAS.get(module, kind)
        from agentv.system.extras import install_line

        raise SetupError(
            f"target {target!r} ({kind}) needs the {module!r} package, which is not installed; "
            f"install agentv's `{extra}` extra: {install_line(extra)}"
        ) from None
