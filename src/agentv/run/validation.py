"""Checking eval, targets and config files without running anything (``agentv validate``).

Each YAML file is recognised by its ``$schema``: ``agentv-eval-v2`` (eval file),
``agentv-targets-v2.2`` (targets file) or ``agentv-config-v2`` (``.agentv/config.yaml``).
Every problem in a file is reported at once, each with its line and column, what is wrong
and how to fix it. Errors make a file invalid; warnings (an unpaired tool message, a role
marker inside content) do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentv.errors import ConfigError, Diagnostic, DiagnosticsView, InputError
from agentv.evalfile.finder import is_yaml, yaml_files
from agentv.evalfile.guidelines import CONFIG_SCHEMA, parse_config
from agentv.evalfile.loader import LoadContext, LoadedEvalFile, load_eval_file
from agentv.evalfile.schema import EVAL_SCHEMA
from agentv.run.plan import Plan, same_cases
from agentv.system.readfile import resolved, special
from agentv.targets import TARGETS_SCHEMA, validate_targets_file
from agentv.yaml.source import StreamSource, YamlSource, leading_schema, load_yaml, read_text

FileKind = Literal["eval", "targets", "config"]
SCHEMAS: dict[str, FileKind] = {
    EVAL_SCHEMA: "eval",
    TARGETS_SCHEMA: "targets",
    CONFIG_SCHEMA: "config",
}


@dataclass
class FileReport(DiagnosticsView):
    """What ``validate`` found in one file."""

    path: Path
    kind: FileKind | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    entries: int | None = None  # cases, targets or patterns found in the file
    skipped: int = 0  # eval files: cases that have errors (they would run as `invalid`)
    #: eval files: the loader's reading, for the checks of the targets its cases need
    loaded: LoadedEvalFile | None = field(default=None, repr=False, compare=False)

    @property
    def valid(self) -> bool:
        """No errors (warnings alone keep a file valid)."""
        return not self.errors

    def describe(self) -> str:
        """``eval file, 4 cases`` and the like."""
        if self.kind is None:
            return ""
        noun = {"eval": "case", "targets": "target", "config": "guideline pattern"}[self.kind]
        text = f"{self.kind} file"
        if self.entries is not None:
            text += f", {self.entries} {noun}{'' if self.entries == 1 else 's'}"
        if self.skipped:
            text += f", {self.skipped} with errors"
        return text


def find_yaml_files(paths: Iterable[Path]) -> tuple[list[Path], list[FileReport]]:
    """The YAML files named by ``paths`` (folders searched recursively), plus a report for
    each path that cannot be used (missing, or a file that is not YAML)."""
    found: dict[Path, None] = {}
    problems: list[FileReport] = []
    for given in paths:
        path = Path(given)
        if not path.exists() and not special(path):
            problems.append(
                FileReport(
                    path.absolute(),
                    diagnostics=[
                        Diagnostic(path, "path not found", hint="check the spelling of the path")
                    ],
                )
            )
        elif path.is_dir():
            for file in _walk(path.resolve(), problems):
                found.setdefault(file, None)
        elif is_yaml(path):
            found.setdefault(resolved(path), None)
        else:
            problems.append(
                FileReport(
                    resolved(path),
                    diagnostics=[
                        Diagnostic(
                            resolved(path),
                            "not a YAML file",
                            hint="agentv files end in .yaml or .yml",
                        )
                    ],
                )
            )
    return list(found), problems


def _walk(folder: Path, problems: list[FileReport]) -> list[Path]:
    def unreadable(exc: OSError) -> None:
        """A folder that cannot be opened gets a report of its own."""
        where = Path(exc.filename or folder)
        problems.append(
            FileReport(
                where,
                diagnostics=[
                    Diagnostic(
                        where,
                        f"cannot read this folder: {exc.strerror or exc}",
                        hint="check its permissions",
                    )
                ],
            )
        )

    return yaml_files(folder, on_error=unreadable)


def validate_paths(
    paths: Sequence[Path],
    *,
    allow_outside_root: bool = False,
    target: str | Sequence[str] | None = None,
    targets_file: Path | None = None,
    cwd: Path | None = None,
) -> list[FileReport]:
    """Validate every YAML file under ``paths``; one report per file, in a stable order.

    A problem found in another file while checking one (a broken ``.agentv/config.yaml``
    an eval file relies on) is reported under that other file. Eval files also get the
    checks ``agentv eval`` makes before sending anything (``check_run_targets``): with the
    same ``target`` and ``targets_file``, ``validate`` passes exactly when a run would start
    every case.
    """
    files, problems = find_yaml_files(paths)
    context = LoadContext(allow_outside_root=allow_outside_root, keys_twice="error")
    reports: dict[Path, FileReport] = {r.path: r for r in problems}

    def add(report: FileReport, others: Iterable[Diagnostic]) -> None:
        _merge(reports, report)
        for diag in others:
            assert diag.file is not None
            _merge(reports, FileReport(Path(diag.file), kind=None, diagnostics=[diag]))

    for path in files:
        add(*validate_file(path, context))
    loaded = [r.loaded for r in reports.values() if r.loaded is not None]
    for diag in same_cases(loaded):
        add(FileReport(Path(diag.file or loaded[0].path)), [diag])
    if loaded:
        names = [target] if isinstance(target, str) else list(target or [])
        found = check_run_targets(
            loaded, context, cli_targets=names, targets_file=targets_file, cwd=cwd
        )
        for diag in found:
            add(FileReport(Path(diag.file or loaded[0].path)), [diag])
    return list(reports.values())


def check_run_targets(
    files: Sequence[LoadedEvalFile],
    context: LoadContext,
    *,
    cli_targets: Sequence[str] = (),
    targets_file: Path | None = None,
    cwd: Path | None = None,
) -> list[Diagnostic]:
    """What ``agentv eval`` checks before the first request, for already loaded eval files:
    each case's target (``--target``, else its own, else ``default``) and judge exist in the
    targets file found for it, and can be built (settings valid, ``${{ VAR }}`` set, from the
    environment or the ``.env`` a run reads). Nothing is sent; healthchecks are not run.

    An eval file for which no targets file is found gets a warning: its targets cannot be
    checked (a run needs a targets file, or ``--dry-run``).
    """
    from agentv.system.env import environment_scope, read_environment
    from agentv.targets.discovery import find_targets_file

    base = (cwd or Path.cwd()).resolve()
    out: list[Diagnostic] = []
    checked: list[LoadedEvalFile] = []
    for loaded in files:
        if targets_file is None and find_targets_file(loaded.path, loaded.repo_root, base) is None:
            out.append(
                Diagnostic(
                    loaded.path,
                    "no targets file found, so the targets its cases run on were not checked",
                    severity="warning",
                    hint="`agentv init` writes .agentv/targets.yaml; or pass --targets PATH",
                )
            )
        else:
            checked.append(loaded)
    if not checked:
        return out
    env, _ = read_environment(checked[0].repo_root, base)  # as a run reads it (docs/targets.md)
    with environment_scope(env):
        return out + _target_problems(checked, context, cli_targets, targets_file, base)


def _target_problems(
    checked: list[LoadedEvalFile],
    context: LoadContext,
    cli_targets: Sequence[str],
    targets_file: Path | None,
    base: Path,
) -> list[Diagnostic]:
    import asyncio

    from agentv.targets import TargetPool

    out: list[Diagnostic] = []
    pool = TargetPool(
        cwd=base, targets_path=(base / targets_file) if targets_file is not None else None
    )
    plan = Plan(
        files=tuple(checked),
        diagnostics=(),
        pool=pool,
        cli_targets=tuple(dict.fromkeys(cli_targets)),
        context=context,
    )
    try:
        plan.check_targets(stop=False)
        out.extend(plan.target_problems())
    except InputError as exc:  # a targets file that cannot be read: reported under it
        out.extend(exc.diagnostics or [Diagnostic(None, str(exc))])
    except ConfigError as exc:  # --targets names no file
        out.append(Diagnostic(checked[0].path, str(exc), hint="check the --targets path"))
    finally:
        asyncio.run(pool.aclose())
    return out


def _merge(reports: dict[Path, FileReport], report: FileReport) -> None:
    existing = reports.setdefault(report.path, FileReport(report.path))
    existing.kind = existing.kind or report.kind
    existing.skipped = existing.skipped or report.skipped
    existing.loaded = existing.loaded or report.loaded
    if existing.entries is None:
        existing.entries = report.entries
    seen = {(d.line, d.column, d.message) for d in existing.diagnostics}
    for diag in report.diagnostics:
        if (diag.line, diag.column, diag.message) not in seen:
            seen.add((diag.line, diag.column, diag.message))
            existing.diagnostics.append(diag)
    existing.diagnostics.sort(key=lambda d: (d.line or 0, d.column or 0))


def validate_file(
    path: Path, context: LoadContext | None = None
) -> tuple[FileReport, list[Diagnostic]]:
    """Check one file: its report, and diagnostics that belong to other files."""
    context = context or LoadContext(keys_twice="error")
    quick = _quick_eval_check(path, context)
    if quick is not None:
        return quick
    report = FileReport(path)
    try:
        src = load_yaml(path)
    except InputError as exc:
        report.diagnostics = exc.diagnostics
        return report, []
    data = src.data
    schema = data.get("$schema") if isinstance(data, dict) else None
    kind = SCHEMAS.get(schema) if isinstance(schema, str) else None
    if kind is None:
        report.diagnostics = [_schema_problem(src, schema)]
        return report, []
    report.kind = kind
    # an eval file's keys written twice come with the loader's reading
    diags = src.duplicate_keys() if kind != "eval" else []
    try:
        if kind == "eval":
            found, report.entries, report.skipped, report.loaded = _check_eval(src, context)
        elif kind == "targets":
            found, report.entries = _check_targets(src)
        else:
            found, report.entries = _check_config(src)
    except Exception as exc:  # a bug in a checker must not hide the other files' results
        found = [
            Diagnostic(
                path,
                f"internal error while checking this file: {type(exc).__name__}: {exc}",
                hint="this is a bug in agentv; please report it with the file",
            )
        ]
    return _settle(report, diags, found, report.loaded.rows_source if report.loaded else None)


def _quick_eval_check(
    path: Path, context: LoadContext
) -> tuple[FileReport, list[Diagnostic]] | None:
    """An eval file that starts with its ``$schema`` and loads: checked from the loader's
    one reading (keys written twice included), as a run reads it. Anything else
    (None) takes the general path, which reads the whole file first: at 10,000 cases that
    reading costs a third of ``validate``'s time (docs/speed.md)."""
    try:
        text = read_text(path, strict=True)
    except (OSError, UnicodeDecodeError):
        return None
    if SCHEMAS.get(leading_schema(text) or "") != "eval":
        return None
    try:
        loaded = load_eval_file(path, context=context, text=text, check_only=True)
    except Exception:  # the general path reports it (a bug included)
        return None
    stream = loaded.source.result if isinstance(loaded.source, StreamSource) else None
    if (stream is None or stream.items is None) and loaded.rows is None:
        return None  # no list of cases read as one (merged in, an alias): counted there
    report = FileReport(path, kind="eval", entries=loaded.total_cases, loaded=loaded)
    report.skipped = len(loaded.invalid) + loaded.invalid_rows
    return _settle(report, [], loaded.diagnostics, loaded.rows_source)


def _settle(
    report: FileReport,
    diags: list[Diagnostic],
    found: list[Diagnostic],
    data: Path | None = None,
) -> tuple[FileReport, list[Diagnostic]]:
    """``found`` split into the file's own diagnostics (added to ``diags``, sorted into the
    report) and those about other files (returned); those about its ``data`` file (the
    rows its cases are made from) are its own."""
    others: list[Diagnostic] = []
    for diag in found:
        if diag.file is not None and Path(diag.file) not in (report.path, data):
            others.append(diag)
        else:
            diags.append(diag)
    report.diagnostics = sorted(
        diags, key=lambda d: (Path(d.file or "") != report.path, d.line or 0, d.column or 0)
    )
    return report, others


def _schema_problem(src: YamlSource, schema: object) -> Diagnostic:
    known = ", ".join(f"{name} ({kind} file)" for name, kind in SCHEMAS.items())
    if not isinstance(src.data, dict):
        what = "the file is empty" if src.data is None else "the file is not a YAML mapping"
        return src.diagnostic((), f"{what}, so it has no `$schema`", hint=f"known schemas: {known}")
    if schema is None:
        return src.diagnostic(
            (), "missing `$schema`", hint=f"add `$schema: ...` at the top; known schemas: {known}"
        )
    return src.diagnostic(
        ("$schema",), f"unknown `$schema` {schema!r}", hint=f"known schemas: {known}"
    )


def _check_eval(
    src: YamlSource, context: LoadContext
) -> tuple[list[Diagnostic], int, int, LoadedEvalFile | None]:
    """(diagnostics, number of cases, number of cases with errors, the loaded file).

    The cases with errors are the loader's invalid cases: those a run records as
    ``invalid`` (when the file as a whole is unusable, those its errors are about).
    """
    entries = src.data.get("evalcases") if isinstance(src.data, dict) else None
    total = len(entries) if isinstance(entries, list) else 0
    try:
        # The loader's own reading, from the text already read: what `validate` reports is
        # exactly what a run reports.
        loaded = load_eval_file(src.path, context=context, text=src.text, check_only=True)
    except InputError as exc:
        bad = {case_index(d) for d in exc.diagnostics if d.severity == "error"}
        return exc.diagnostics, total, len(bad - {None}), None
    total += loaded.row_cases
    return loaded.diagnostics, total, len(loaded.invalid) + loaded.invalid_rows, loaded


def case_index(diag: Diagnostic) -> int | None:
    """The index of the case a diagnostic is about, from its location ``evalcases[3]...``."""
    loc = diag.location or ""
    if loc.startswith("evalcases["):
        return int(loc[len("evalcases[") : loc.index("]")])
    return None


def _check_targets(src: YamlSource) -> tuple[list[Diagnostic], int | None]:
    targets_list = src.data.get("targets") if isinstance(src.data, dict) else None
    count = len(targets_list) if isinstance(targets_list, list) else None
    # the targets package is the authority on its own format
    return validate_targets_file(src.path), count


def _check_config(src: YamlSource) -> tuple[list[Diagnostic], int | None]:
    config, diags = parse_config(src.path)
    patterns = src.data.get("guideline_patterns") if isinstance(src.data, dict) else None
    if config is not None and isinstance(patterns, list) and not patterns:
        diags.append(
            src.diagnostic(
                ("guideline_patterns",),
                "`guideline_patterns` is empty: no attached file will be treated as a guideline",
                hint="remove the key to use the default patterns, or keep it if that is meant",
                severity="warning",
            )
        )
    return diags, len(config.patterns) if config is not None else None
