"""Step 4 of the data flow: ``targets.yaml`` (``$schema: agentv-targets-v2.2``) to providers.

(Interface stub: the issue "Targets and LM providers" fills it in.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentv.errors import ConfigError, Diagnostic
from agentv.providers.base import Provider

TARGETS_SCHEMA = "agentv-targets-v2.2"


@dataclass
class TargetDefinition:
    """One entry of ``targets.yaml``; provider fields are kept raw until the target is used."""

    name: str
    kind: str  # canonical provider kind (aliases resolved)
    provider: str  # as written
    fields: dict[str, Any]  # provider-specific fields, `${{ VAR }}` not yet substituted
    judge_target: str | None = None
    workers: int | None = None
    provider_batching: bool = False
    source: Path | None = None
    index: int = 0  # position in the file, for locating errors


@dataclass
class TargetsFile:
    """A parsed targets file."""

    path: Path
    targets: dict[str, TargetDefinition] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def get(self, name: str) -> TargetDefinition:
        """The named target, or a ``ConfigError`` listing the available names."""
        try:
            return self.targets[name]
        except KeyError:
            names = ", ".join(self.targets) or "(none)"
            raise ConfigError(
                f"target {name!r} not found in {self.path}; available targets: {names}"
            ) from None


def discover_targets_file(
    eval_file: Path, repo_root: Path, cwd: Path, explicit: Path | None = None
) -> Path:
    """``explicit`` if given, else ``.agentv/targets.yaml`` (or ``targets.yaml``) searched from
    the eval file's folder up to the repository root, then the working directory."""
    raise NotImplementedError


def load_targets_file(path: Path) -> TargetsFile:
    """Parse and validate a targets file; raises ``InputError`` when unusable."""
    raise NotImplementedError


def validate_targets_file(path: Path) -> list[Diagnostic]:
    """Every problem in a targets file (for ``agentv validate``)."""
    raise NotImplementedError


def create_provider(definition: TargetDefinition, env: Mapping[str, str] | None = None) -> Provider:
    """Substitute ``${{ VAR }}`` values, validate the provider's settings, build the provider."""
    raise NotImplementedError
