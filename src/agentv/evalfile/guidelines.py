"""Which attached files are guidelines (instructions for the system prompt).

Patterns come from the nearest ``.agentv/config.yaml`` (``$schema: agentv-config-v2``,
key ``guideline_patterns``) between the eval file's folder and the repository root. With
no config the four default patterns apply; an explicit empty list means "none". A file is a
guideline when its resolved path, relative to the repository root and written with ``/``,
matches a pattern with globstar semantics (``**`` spans zero or more folders; wildcards do
not match dot-files, as in micromatch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wcmatch import glob

from agentv.errors import Diagnostic, InputError
from agentv.evalfile.schema_errors import unknown_key
from agentv.system.readfile import special
from agentv.yaml.source import load_yaml

CONFIG_SCHEMA = "agentv-config-v2"
DEFAULT_GUIDELINE_PATTERNS: tuple[str, ...] = (
    "**/*.instructions.md",
    "**/instructions/**",
    "**/*.prompt.md",
    "**/prompts/**",
)
_GLOB_FLAGS = glob.GLOBSTAR | glob.NEGATE
#: the most guideline patterns a config may list: wcmatch's limit (its default) on the
#: patterns one match compiles; with these flags each pattern compiles to one, so the limit
#: is on the list's length
GUIDELINE_PATTERN_LIMIT = 1000


def is_guideline(relative_posix: str, patterns: tuple[str, ...]) -> bool:
    """Whether a repository-relative ``/`` path matches any guideline pattern."""
    if not patterns or relative_posix.startswith("../"):
        return False
    return glob.globmatch(
        relative_posix, list(patterns), flags=_GLOB_FLAGS, limit=GUIDELINE_PATTERN_LIMIT
    )


def _too_many_patterns(patterns: list[str]) -> bool:
    """Whether the matcher refuses ``patterns`` (more than it compiles at once)."""
    if len(patterns) > GUIDELINE_PATTERN_LIMIT:
        return True
    # Counted from what wcmatch compiles (limit 0: no limit of its own), should a future
    # wcmatch expand a pattern into several; its limit's exception is not public.
    positive, negative = glob.translate(patterns, flags=_GLOB_FLAGS, limit=0)
    return len(positive) + len(negative) > GUIDELINE_PATTERN_LIMIT


@dataclass(frozen=True, slots=True)
class GuidelineConfig:
    """The ``.agentv/config.yaml`` in force for one eval file: guideline patterns, the pass
    threshold, and where they came from."""

    patterns: tuple[str, ...]
    source: Path | None  # None: the defaults
    pass_threshold: float | None = None  # None: the run's default
    user_target: str | None = None  # the target of simulated users without one of their own
    run_store: str | None = None  # the run store's path, relative to the project folder
    register_runs: bool = True  # whether agentv eval registers its runs in the store


CONFIG_KEYS = (
    "$schema",
    "guideline_patterns",
    "pass_threshold",
    "user_target",
    "run_store",
    "register_runs",
)


def parse_config(path: Path) -> tuple[GuidelineConfig | None, list[Diagnostic]]:
    """Read one ``.agentv/config.yaml``; returns (config or None when unusable, diagnostics)."""
    diags: list[Diagnostic] = []
    try:
        src = load_yaml(path)
    except InputError as exc:
        return None, exc.diagnostics
    data = src.data
    if not isinstance(data, dict):
        diags.append(
            src.diagnostic(
                (),
                "config file must be a YAML mapping",
                hint=f"start it with `$schema: {CONFIG_SCHEMA}`",
            )
        )
        return None, diags
    schema = data.get("$schema")
    if schema != CONFIG_SCHEMA:
        msg = "missing `$schema`" if schema is None else f"`$schema` is {schema!r}"
        diags.append(
            src.diagnostic(
                ("$schema",),
                f"{msg}; expected {CONFIG_SCHEMA!r}",
                hint=f"add `$schema: {CONFIG_SCHEMA}` at the top",
            )
        )
        return None, diags
    for key in data:
        if key not in CONFIG_KEYS:
            # a warning: the key is ignored, the rest of the config still holds
            diags.append(
                unknown_key(
                    src,
                    (key,),
                    str(key),
                    CONFIG_KEYS,
                    f"unknown key {key!r} in config (ignored)",
                    severity="warning",
                )
            )
    threshold = data.get("pass_threshold")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 <= threshold <= 1
    ):
        diags.append(
            src.diagnostic(
                ("pass_threshold",),
                "`pass_threshold` must be a number from 0 to 1",
                hint="the lowest score a case needs to pass, e.g. `pass_threshold: 0.8`",
            )
        )
        return None, diags
    threshold = float(threshold) if threshold is not None else None
    user_target = data.get("user_target")
    if user_target is not None and (not isinstance(user_target, str) or not user_target.strip()):
        diags.append(
            src.diagnostic(
                ("user_target",),
                "`user_target` must be the name of a target",
                hint="the target that plays simulated users, e.g. `user_target: simulator`",
            )
        )
        return None, diags
    run_store = data.get("run_store")
    if run_store is not None and (not isinstance(run_store, str) or not run_store.strip()):
        diags.append(
            src.diagnostic(
                ("run_store",),
                "`run_store` must be a path",
                hint="where the run history goes, relative to the project folder, e.g. "
                "`run_store: .agentv/runs.sqlite`",
            )
        )
        return None, diags
    register = data.get("register_runs", True)
    if not isinstance(register, bool):
        diags.append(
            src.diagnostic(
                ("register_runs",),
                "`register_runs` must be true or false",
                hint="`register_runs: false` keeps agentv eval from registering its runs",
            )
        )
        return None, diags
    stored = {"run_store": run_store.strip() if run_store else None, "register_runs": register}
    if "guideline_patterns" not in data or data["guideline_patterns"] is None:
        return (
            GuidelineConfig(DEFAULT_GUIDELINE_PATTERNS, path, threshold, user_target, **stored),
            diags,
        )
    patterns = data["guideline_patterns"]
    if not isinstance(patterns, list) or not all(
        isinstance(p, str) and p.strip() for p in patterns
    ):
        diags.append(
            src.diagnostic(
                ("guideline_patterns",),
                "`guideline_patterns` must be a list of glob strings",
                hint='for example: guideline_patterns: ["**/*.instructions.md"]',
            )
        )
        return None, diags
    patterns = [p.strip() for p in patterns]
    if _too_many_patterns(patterns):
        diags.append(
            src.diagnostic(
                ("guideline_patterns",),
                f"`guideline_patterns` lists {len(patterns)} patterns; "
                f"at most {GUIDELINE_PATTERN_LIMIT} are allowed",
                hint="match more files per pattern (`**` spans folders), "
                "for example `**/instructions/**`",
            )
        )
        return None, diags
    return GuidelineConfig(tuple(patterns), path, threshold, user_target, **stored), diags


@dataclass
class GuidelineResolver:
    """Finds and caches the guideline config for each folder during a run."""

    _by_dir: dict[tuple[Path, Path], tuple[GuidelineConfig, list[Diagnostic]]] = field(
        default_factory=dict
    )

    def for_eval_dir(
        self, eval_dir: Path, repo_root: Path
    ) -> tuple[GuidelineConfig, list[Diagnostic]]:
        """The nearest valid config from ``eval_dir`` up to ``repo_root``, else the defaults."""
        key = (eval_dir, repo_root)
        hit = self._by_dir.get(key)
        if hit is not None:
            return hit
        diags: list[Diagnostic] = []
        result = GuidelineConfig(DEFAULT_GUIDELINE_PATTERNS, None)
        for folder in (eval_dir, *eval_dir.parents):
            cfg_path = folder / ".agentv" / "config.yaml"
            if cfg_path.is_file() or special(cfg_path):  # refused in words when read
                cfg, found = parse_config(cfg_path)
                diags.extend(found)
                if cfg is not None:
                    result = cfg
                    break
            if folder == repo_root:
                break
        self._by_dir[key] = (result, diags)
        return result, diags
