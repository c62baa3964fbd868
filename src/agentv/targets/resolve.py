"""From a target's definition to its provider: ``${{ VAR }}`` values, ``.env``, previews.

``create_provider`` substitutes ``${{ VAR }}`` references, anywhere inside a string, from the
run's environment (the process's variables over its ``.env``: see ``agentv.system.env``), makes
relative paths start from the project folder, and builds the provider. A preview
(``agentv render``) needs no secrets: ``preview_environment`` reads ``.env`` without changing
the process environment, and an unset variable shows as ``<unset:VAR>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentv.errors import ConfigError, SetupError
from agentv.providers import registry
from agentv.providers.base import Provider
from agentv.system.env import read_environment, run_environment
from agentv.targets.discovery import project_dir
from agentv.targets.paths import (
    anchor_paths,
)
from agentv.targets.schema import (
    BROKEN_ENV_REF,
    BROKEN_ENV_REF_HINT,
    ENV_REF,
    TargetDefinition,
    broken_env_ref,
)
from agentv.targets.schema_errors import (
    describe_error,
    validate_without,
)

_PLACEHOLDER = re.compile(r"<unset:[A-Za-z_][A-Za-z0-9_]*>")  # see `unset_placeholder`
_ENV_HINT = (
    "set it in the environment, or in a .env file at the project's root (the repository's, "
    "else the folder holding .agentv/)"
)


def unset_placeholder(var: str) -> str:
    """What ``render`` shows in place of variable ``var`` when it is not set."""
    return f"<unset:{var}>"


def substitute_env(
    value: Any,
    env: Mapping[str, str],
    *,
    target: str,
    field_name: str,
    unset: list[str] | None = None,
    substituted: list[str] | None = None,
) -> Any:
    """``value`` with every ``${{ VAR }}`` replaced from ``env`` (in nested lists and maps too).

    A variable that is not set, or set to blank, is a ``SetupError`` naming the target, the
    field and the variable. When ``unset`` is given (for a preview), such a variable becomes
    ``<unset:VAR>`` instead and its name is added to ``unset``. A ``${{`` that starts no
    complete reference is a ``ConfigError`` naming the field (never the value). Each value
    put in is added to ``substituted`` when given (the run masks them: ``agentv.system.masking``).
    """
    if isinstance(value, str):
        if broken_env_ref(value):
            raise ConfigError(
                f"target {target!r}: field {field_name!r} {BROKEN_ENV_REF}; {BROKEN_ENV_REF_HINT}"
            )

        def replace(match: re.Match[str]) -> str:
            var = match.group(1)
            found = env.get(var)
            if found is None or not found.strip():
                if unset is not None:
                    unset.append(var)
                    return unset_placeholder(var)
                what = "not set" if found is None else "empty"
                raise SetupError(
                    f"target {target!r}: field {field_name!r} uses environment variable "
                    f"{var}, which is {what}; {_ENV_HINT}"
                )
            if substituted is not None:
                substituted.append(found.strip())
            return found.strip()

        return ENV_REF.sub(replace, value)
    if isinstance(value, dict):
        return {
            k: substitute_env(
                v,
                env,
                target=target,
                field_name=f"{field_name}.{k}",
                unset=unset,
                substituted=substituted,
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            substitute_env(
                v,
                env,
                target=target,
                field_name=f"{field_name}[{i}]",
                unset=unset,
                substituted=substituted,
            )
            for i, v in enumerate(value)
        ]
    return value


def create_provider(
    definition: TargetDefinition,
    env: Mapping[str, str] | None = None,
    *,
    unset: list[str] | None = None,
    substituted: list[str] | None = None,
    cwd: Path | None = None,
) -> Provider:
    """Substitute ``${{ VAR }}`` values, validate the provider's settings, build the provider.

    ``unset`` is for previews (``agentv render``), which must work without secrets: a
    variable that is not set becomes ``<unset:VAR>`` and is listed in ``unset``, a setting
    that such a placeholder makes invalid (a number) keeps its default, and a missing API
    key is no error. An unusable definition (``TargetDefinition.problems``) raises its
    ``ConfigError`` before anything else. The values put in for ``${{ VAR }}`` are added
    to ``substituted`` when given. ``cwd``: the run's folder, where the settings' unset
    ``run_folder_defaults`` point (given as absolute paths, so that a case run on another
    machine's process writes where the run was started, not where that process runs).
    """
    definition.require_usable()  # an entry with problems of its own is never built
    env = run_environment() if env is None else env
    fields = {
        key: substitute_env(
            value,
            env,
            target=definition.name,
            field_name=key,
            unset=unset,
            substituted=substituted,
        )
        for key, value in definition.fields.items()
    }
    cls = registry.provider_class(definition.kind)
    if definition.source is not None:
        anchor_paths(cls.Settings, fields, project_dir(definition.source))
    try:
        if unset:
            settings = validate_without(cls.Settings, fields, _PLACEHOLDER)
        else:
            settings = cls.Settings.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(describe_error(err) for err in exc.errors())
        where = f"{definition.source}: " if definition.source else ""
        raise ConfigError(
            f"{where}target {definition.name!r} ({definition.provider}): {problems}"
        ) from None
    has_key_field = "api_key" in type(settings).model_fields
    if unset is not None and has_key_field and not (settings.api_key or "").strip():
        # A preview sends nothing and never shows a key, so a target that would take its
        # key from the vendor's usual variable renders without that variable.
        settings = settings.model_copy(update={"api_key": unset_placeholder("api_key")})
    if cwd is not None:
        defaults = {
            name: str(cwd / relative)
            for name, relative in cls.Settings.run_folder_defaults.items()
            if getattr(settings, name) is None
        }
        if defaults:
            settings = settings.model_copy(update=defaults)
    return cls(definition.name, settings)


def preview_environment(repo_root: Path, cwd: Path) -> dict[str, str]:
    """The variables ``agentv eval`` would see: the environment over the ``.env`` file it
    would load (``agentv.system.env.find_env_file``), read without changing the process
    environment."""
    return read_environment(repo_root, cwd)[0]
