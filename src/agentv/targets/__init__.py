"""Step 4 of the data flow: ``targets.yaml`` (``$schema: agentv-targets-v2.2``) to providers.

A targets file lists named targets; each names a ``provider`` kind (or an alias) and carries
that provider's fields at the top level of its entry::

    $schema: agentv-targets-v2.2
    targets:
      - name: default
        provider: openai
        model: gpt-4o-mini
        api_key: ${{ OPENAI_API_KEY }}
        judge_target: judge

The package, in the order a run uses it:

- ``discovery``: which targets file an eval file uses, and its project folder;
- ``schema``: the file's and an entry's pydantic models, and the one translator of their
  validation errors (and of the providers' ``Settings`` errors) into located diagnostics;
- ``loader``: reading and checking a file, without looking at the environment, so that
  ``agentv validate`` works without any key set; a problem of one entry marks that entry
  unusable (an error only for a run that uses it), a problem of the file stops the file;
- ``resolve``: ``${{ VAR }}`` substitution, ``.env`` for previews, building a provider;
- ``pool``: which target a case runs on (``choose_target``), each target built once per
  run, judges (``check_judge`` builds one before anything is sent), dry runs, and previews
  for ``agentv render``.
"""

from agentv.targets.discovery import (
    CANDIDATE_NAMES,
    discover_targets_file,
    find_targets_file,
    project_dir,
)
from agentv.targets.loader import (
    load_targets_file,
    parse_targets,
    setup_diagnostics,
    validate_targets_file,
)
from agentv.targets.paths import (
    anchor_paths,
    path_layout,
)
from agentv.targets.pool import (
    DEFAULT_TARGET,
    DryRun,
    RunTarget,
    TargetPool,
    choose_target,
)
from agentv.targets.resolve import (
    create_provider,
    preview_environment,
    substitute_env,
    unset_placeholder,
)
from agentv.targets.schema import (
    COMMON_KEYS,
    TARGETS_SCHEMA,
    TargetDefinition,
    TargetEntry,
    TargetsDocument,
    TargetsFile,
    settings_keys,
)
from agentv.targets.schema_errors import (
    translate_errors,
)

__all__ = [
    "CANDIDATE_NAMES",
    "COMMON_KEYS",
    "DEFAULT_TARGET",
    "TARGETS_SCHEMA",
    "DryRun",
    "RunTarget",
    "TargetDefinition",
    "TargetEntry",
    "TargetPool",
    "TargetsDocument",
    "TargetsFile",
    "anchor_paths",
    "choose_target",
    "create_provider",
    "discover_targets_file",
    "find_targets_file",
    "load_targets_file",
    "parse_targets",
    "path_layout",
    "preview_environment",
    "project_dir",
    "settings_keys",
    "setup_diagnostics",
    "substitute_env",
    "translate_errors",
    "unset_placeholder",
    "validate_targets_file",
]
