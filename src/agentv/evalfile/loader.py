"""Load an eval file (``$schema: agentv-eval-v2``) into ``EvalCase`` objects.

Every problem is collected as a ``Diagnostic`` with its file, line and column. A case with
an error cannot run: it is kept as an ``InvalidCase`` (its result says why) and the others
still run. What can be known before the first request is checked here, so that ``eval``
and ``validate`` say it alike: referenced files, duplicate ids, regex patterns, JSON
Schemas, code evaluators' scripts (``checks.py``). A file that cannot be used at all (bad
YAML, wrong ``$schema``, no ``evalcases`` list, a broken header) raises ``InputError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agentv.cases import EvalCase, EvaluatorConfig, InvalidCase
from agentv.errors import Diagnostic, DiagnosticsView, InputError, Severity
from agentv.evalfile import schema as sc
from agentv.evalfile.checks import Problem, SchemaChecker, regex_problem, script_problem
from agentv.evalfile.files import FileStore, find_repo_root, is_within, search_roots
from agentv.evalfile.guidelines import GuidelineResolver, is_guideline
from agentv.evalfile.spool import CaseSpool
from agentv.evalfile.validation_errors import grader_key, translate, unknown_key
from agentv.messages import (
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    Segment,
    TextSegment,
    ToolCall,
)
from agentv.yamlio import PathKey, StreamSource, YamlSource, describe_decode_error, read_error
from agentv.yamlstream import NotUtf8Error, StreamResult, stream_yaml

_CASE_ADAPTER = sc.RawEvalCase

#: an attachment larger than this (characters) is worth a warning: it goes whole into
#: every request of the cases that attach it
LARGE_ATTACHMENT = 10 * 2**20

ROLE_MARKER_RE = re.compile(r"@\[(?:system|user|assistant|tool)\]:", re.IGNORECASE)
"""A role marker as written in ``question`` texts (docs/prompt-rules.md section 4)."""


def _enumerate_list(value: Any) -> list[tuple[int, Any]]:
    return list(enumerate(value)) if isinstance(value, list) else []


def block_is_file(block: Any) -> bool:
    """Whether a raw content block is ``{type: file, ...}``."""
    return isinstance(block, dict) and block.get("type") == "file"


@dataclass
class LoadContext:
    """What is shared by every file loaded in one run: file cache, configs, options."""

    store: FileStore = field(default_factory=FileStore)
    guidelines: GuidelineResolver = field(default_factory=GuidelineResolver)
    allow_outside_root: bool = False
    #: how a key written twice is reported: a run warns and uses the last one, as YAML does;
    #: ``agentv validate`` calls it an error
    keys_twice: Severity = "warning"

    @property
    def cwd(self) -> Path:
        """The run's working directory (the last place references are looked up in)."""
        return self.store.cwd


@dataclass
class LoadedEvalFile(DiagnosticsView):
    """The usable cases of one eval file, the cases that cannot run, and every diagnostic."""

    path: Path
    dataset: str
    target: str | None  # the file's `target` (else its `execution.target`)
    cases: list[EvalCase]
    diagnostics: list[Diagnostic]
    repo_root: Path
    total_cases: int = 0  # entries in `evalcases` (before filtering and skipping)
    source: YamlSource | None = None  # the parsed file, to locate values in it
    case_count: int = 0  # usable cases (those in `cases`, unless `streamed`)
    #: too many cases to hold: `cases` is empty, they are in `spool` (use `iter_cases`),
    #: and `settle` makes them what the whole header says, given each one's flags
    streamed: bool = False
    spool: CaseSpool | None = None
    settle: Callable[[EvalCase, tuple[bool, ...]], EvalCase] | None = None
    case_targets: frozenset[str | None] = frozenset()  # the cases' `execution.target` values
    #: how many usable cases have each `repeat:` value of their own (None: none)
    case_repeats: dict[int | None, int] = field(default_factory=dict)
    #: one per case entry (of `eval_id`, when given) with an error, in file order; kept even
    #: when the usable cases are `streamed` (a file has few of them)
    invalid: list[InvalidCase] = field(default_factory=list)
    repeat: int | None = None  # the file's `repeat`: runs of each case without its own


def load_eval_file(
    path: Path | str,
    *,
    eval_id: str | None = None,
    context: LoadContext | None = None,
    keep_limit: int | None = None,
    text: str | None = None,
) -> LoadedEvalFile:
    """Load one eval file. Raises ``InputError`` when the file as a whole is unusable.

    The ``InputError`` carries every problem found, the cases' included, so that a user
    fixes them in one go. The file is read once: cases are built while it is read, each
    raw case dropped as soon as it is built. With ``keep_limit``, a file with more usable
    cases than that keeps none of them in memory (``streamed`` is set): they were checked,
    and wait in a spool on disk (``agentv.evalfile.spool``) from which ``iter_cases`` reads
    them one at a time, so memory stays flat however large the suite. ``text`` is the
    file's content when it was read already (``validate``); it is parsed instead of
    reading ``path``.
    """
    load = _FileLoad(Path(path).resolve(), context or LoadContext(), eval_id, keep_limit)
    return load.load(text)


def iter_cases(
    loaded: LoadedEvalFile, *, eval_id: str | None = None, context: LoadContext | None = None
) -> Iterator[EvalCase]:
    """The usable cases of a file, one at a time: those kept in memory, or those of its
    spool (``keep_limit``). Their problems were reported when the file was loaded; the
    invalid cases are in ``loaded.invalid``. ``eval_id`` and ``context`` were applied when
    it was loaded; they are accepted for the callers that pass them along."""
    spool = loaded.spool
    if spool is None:
        yield from loaded.cases
        return
    settle = loaded.settle
    for case, flags in spool.cases():
        yield case if settle is None else settle(case, flags)


_STREAM_KEY = "evalcases"


class _FileLoad:
    """One reading of one eval file: its cases built one raw case at a time, as they come.

    The header is known in full only at the end of the file, since YAML keeps no order:
    cases are built with the header read so far, and what a key written after them
    changes (``dataset``, ``evaluator``, ``execution``) is set on the kept cases at the end
    (``_settle``).
    """

    def __init__(
        self,
        path: Path,
        ctx: LoadContext,
        eval_id: str | None,
        keep_limit: int | None = None,
    ) -> None:
        self.path = path
        self.ctx = ctx
        self.eval_id = eval_id
        self.keep_limit = keep_limit
        self.stream = StreamResult(data=None)
        self.src = StreamSource(path, self.stream, _STREAM_KEY)
        self.repo_root = find_repo_root(path.parent, ctx.cwd)
        self._builder: _CaseBuilder | None = None
        self.config_diags: list[Diagnostic] = []
        self.cases: list[EvalCase] = []
        self._uses_file_evaluator: list[bool] = []  # for each kept case: the file's `evaluator`
        self._uses_file_evaluators: list[bool] = []  # ... the file's `execution.evaluators`
        self.invalid: list[InvalidCase] = []
        self.diags: list[Diagnostic] = []
        self.count = 0  # usable cases seen
        self.case_targets: set[str | None] = set()  # their `execution.target` values
        self.case_repeats: dict[int | None, int] = {}  # their own `repeat:` values, counted
        self.spool: CaseSpool | None = None  # more usable cases than keep_limit: they go here
        self.settle: Callable[[EvalCase, tuple[bool, ...]], EvalCase] | None = None
        # case id -> (index, line) of the first case with it
        self._first_seen: dict[str, tuple[int, int]] = {}

    def load(self, text: str | None) -> LoadedEvalFile:
        """Read the file, building its cases; raises ``InputError`` if it is unusable."""
        try:
            stream_yaml(
                self.path if text is None else text,
                stream_key=_STREAM_KEY,
                on_item=self._add,
                result=self.stream,
            )
        except (OSError, NotUtf8Error, yaml.YAMLError) as exc:
            raise read_error(self.path, exc, self.stream) from None
        data = self.src.data = self.stream.data
        if not isinstance(data, dict):
            what = "the file is empty" if data is None else "an eval file must be a YAML mapping"
            raise InputError(
                f"{self.path}: not an eval file",
                [self.src.diagnostic((), what, hint=_SCHEMA_HINT)],
            )
        streamed = self.stream.items is not None
        header_diags = _check_header(self.src, {**data, _STREAM_KEY: []} if streamed else data)
        file_unusable = any(d.severity == "error" for d in header_diags)
        if file_unusable and (not streamed or data.get("$schema") not in (None, sc.EVAL_SCHEMA)):
            # Not an eval file, or one without cases: its cases' problems would only add noise.
            raise InputError(f"{self.path}: not a usable eval file", header_diags)
        self._settle(data)
        builder = self.builder()
        header_diags += builder.default_diags
        target = _text_or_none(data.get("target"))
        if target and builder.default_target and builder.default_target != target:
            # Both name the file's target: the top-level `target` wins (it is agentv's own
            # key; `execution.target` comes from the original AgentV's files), and we say so.
            header_diags.append(
                self.src.diagnostic(
                    ("execution", "target"),
                    f"`execution.target` {builder.default_target!r} disagrees with the file's "
                    f"`target` {target!r}; {target!r} is used",
                    hint="keep one of them: both set the target of the cases that name none",
                    severity="warning",
                )
            )
        twice = self._written_twice(text)
        if any(d.severity == "error" for d in header_diags):
            raise InputError(
                f"{self.path}: not a usable eval file",
                header_diags + twice + self.config_diags + self.diags,
            )
        return LoadedEvalFile(
            path=self.path,
            dataset=builder.dataset,
            target=target or builder.default_target,
            cases=self.cases,
            diagnostics=header_diags + twice + self.config_diags + self.diags,
            repo_root=self.repo_root,
            total_cases=self.stream.items or 0,
            source=self.src,
            case_count=self.count,
            streamed=self.spool is not None,
            spool=self.spool,
            settle=self.settle,
            case_targets=frozenset(self.case_targets),
            case_repeats=dict(self.case_repeats),
            invalid=self.invalid,
            repeat=data.get("repeat") if isinstance(data.get("repeat"), int) else None,
        )

    def _written_twice(self, text: str | None) -> list[Diagnostic]:
        """Keys the file writes twice in one mapping (the first is silently dropped: two
        `execution:` blocks in a case, say), with the context's ``keys_twice`` severity."""
        if not self.stream.duplicate_keys:
            return []
        twice = YamlSource(self.path, text, None, stream_duplicates=self.stream.duplicate_keys)
        return [replace(d, severity=self.ctx.keys_twice) for d in twice.duplicate_keys()]

    def builder(self) -> _CaseBuilder:
        """The case builder, made at the first case from the header read by then."""
        if self._builder is None:
            # The header read so far: the same dict goes on filling as the file is read.
            self.src.data = self.stream.data
            header = self.stream.data
            config, self.config_diags = self.ctx.guidelines.for_eval_dir(
                self.path.parent, self.repo_root
            )
            self._builder = _CaseBuilder(
                src=self.src,
                ctx=self.ctx,
                roots=search_roots(self.path.parent, self.repo_root, self.ctx.cwd),
                repo_root=self.repo_root,
                patterns=config.patterns,
                dataset=_dataset(header, self.path),
                default_evaluator=_default_evaluator(header),
            )
            # Keys written before `evalcases` are complete when the first case comes.
            if isinstance(header, dict) and "execution" in header:
                self._builder.set_file_execution(header["execution"])
        return self._builder

    def _build(self, index: int, entry: Any, line: int) -> EvalCase | None:
        """Build one case; its problems go to ``diags``, and a case with an error goes to
        ``invalid``. Returns None for a case that does not run."""
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if self.eval_id is not None and entry_id != self.eval_id:
            return None
        builder = self.builder()
        case, case_diags = builder.build(index, entry, line)
        if isinstance(entry_id, str) and entry_id:
            first = self._first_seen.setdefault(entry_id, (index, line))
            if first[0] != index:
                # Results and --eval-id name cases by id: a second case with it cannot run.
                case = None
                case_diags.append(_duplicate_id(self.src, index, entry_id, first[1]))
        self.diags.extend(case_diags)
        if case is None:
            usable_id = entry_id if isinstance(entry_id, str) and entry_id.strip() else None
            if not any(d.severity == "error" for d in case_diags):  # never an unexplained skip
                case_diags.append(
                    self.src.diagnostic(
                        ("evalcases", index),
                        "this case cannot be read",
                        hint="compare it with a case that loads, or run `agentv validate`",
                    )
                )
                self.diags.append(case_diags[-1])
            self.invalid.append(
                InvalidCase(
                    eval_file=self.path,
                    dataset=builder.dataset,
                    index=index,
                    id=usable_id,
                    line=line,
                    diagnostics=tuple(d for d in case_diags if d.severity == "error"),
                )
            )
        return case

    def _add(self, index: int, entry: Any, line: int) -> None:
        """Build one case and keep it: in memory, or in a spool on disk once more than
        ``keep_limit`` cases were seen."""
        case = self._build(index, entry, line)
        if case is None:
            return
        self.count += 1
        self.case_targets.add(case.target)
        self.case_repeats[case.repeat] = self.case_repeats.get(case.repeat, 0) + 1
        # whether the file's `evaluator` and `execution.evaluators` apply to it (a header
        # key written after the cases changes those that use it: `_settle`)
        uses_default = not (isinstance(entry, dict) and entry.get("evaluator"))
        uses_evaluators = not _has_own_evaluators(entry)
        spool = self.spool
        if spool is None and self.keep_limit is not None and self.count > self.keep_limit:
            spool = self.spool = CaseSpool()  # too many to hold: on disk from now on
            for kept in zip(
                self.cases, self._uses_file_evaluator, self._uses_file_evaluators, strict=True
            ):
                spool.add(*kept)
            self.cases = []
            self._uses_file_evaluator.clear()
            self._uses_file_evaluators.clear()
        if spool is not None:
            spool.add(case, uses_default, uses_evaluators)
            return
        self.cases.append(case)
        self._uses_file_evaluator.append(uses_default)
        self._uses_file_evaluators.append(uses_evaluators)

    def _settle(self, data: dict[str, Any]) -> None:
        """Apply ``dataset``, ``evaluator`` and ``execution`` written after the cases to the
        kept ones (and ``dataset`` to the invalid ones); spooled cases get it as they are
        read back (``settle``).

        The builder is made here for a file without cases, so that a broken guideline
        config is reported for it too.
        """
        builder = self.builder()
        evaluators = None
        if not builder.execution_seen and data.get("execution") is not None:
            builder.set_file_execution(data["execution"])
            evaluators = builder.default_evaluators
        dataset, default = _dataset(data, self.path), _default_evaluator(data)
        renamed = (dataset, default) != (builder.dataset, builder.default_evaluator)
        if renamed:
            builder.dataset, builder.default_evaluator = dataset, default
            self.invalid = [replace(bad, dataset=dataset) for bad in self.invalid]
        if evaluators is None and not renamed:
            return

        def settle(case: EvalCase, flags: tuple[bool, ...]) -> EvalCase:
            uses_default, uses_evaluators = flags
            changes: dict[str, Any] = {}
            if evaluators is not None and uses_evaluators:
                changes["evaluators"] = evaluators
            if renamed:
                changes["dataset"] = dataset
                if uses_default:
                    changes["default_evaluator"] = default
            return replace(case, **changes) if changes else case

        if self.spool is not None:
            self.settle = settle
            return
        self.cases = [
            settle(case, flags)
            for case, *flags in zip(
                self.cases, self._uses_file_evaluator, self._uses_file_evaluators, strict=True
            )
        ]


def _dataset(header: Any, path: Path) -> str:
    value = header.get("dataset") if isinstance(header, dict) else None
    return _text_or_none(value) or path.stem or "eval"


def _default_evaluator(header: Any) -> str:
    value = header.get("evaluator") if isinstance(header, dict) else None
    return value if value in ("llm_judge", "code") else "llm_judge"


def _text_or_none(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _has_own_evaluators(entry: Any) -> bool:
    """Whether a raw case names its evaluators (else the file's `execution.evaluators` apply)."""
    if not isinstance(entry, dict):
        return False
    execution = entry.get("execution")
    if isinstance(execution, dict) and execution.get("evaluators") is not None:
        return True
    return entry.get("evaluators") is not None


def _duplicate_id(src: YamlSource, index: int, case_id: str, line: int) -> Diagnostic:
    return src.diagnostic(
        ("evalcases", index, "id"),
        f"case id {case_id!r} is used more than once (first on line {line})",
        hint="give every case its own id: results and --eval-id refer to cases by id; "
        "this case does not run until it has one",
    )


_SCHEMA_HINT = (
    f"start the file with `$schema: {sc.EVAL_SCHEMA}` and list the cases under `evalcases:`"
)


_OTHER_SCHEMAS = {
    "agentv-targets-v2.2": "a targets file",
    "agentv-config-v2": "a config file (.agentv/config.yaml)",
}


def _check_header(src: YamlSource, data: dict[str, Any]) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    schema = data.get("$schema")
    if schema is None:
        diags.append(
            src.diagnostic(
                (), "missing `$schema`", hint=f"add `$schema: {sc.EVAL_SCHEMA}` at the top"
            )
        )
    elif schema != sc.EVAL_SCHEMA:
        other = _OTHER_SCHEMAS.get(schema) if isinstance(schema, str) else None
        diags.append(
            src.diagnostic(
                ("$schema",),
                f"`$schema` is {schema!r}, expected {sc.EVAL_SCHEMA!r}",
                hint=f"this is {other}, not an eval file"
                if other
                else f"set `$schema: {sc.EVAL_SCHEMA}`",
            )
        )
        if other:
            return diags  # its other keys are right for what it is
    if not isinstance(data.get("evalcases"), list):
        what = "missing" if "evalcases" not in data else "not a list"
        diags.append(
            src.diagnostic(
                ("evalcases",),
                f"`evalcases` is {what}",
                hint="list the cases under `evalcases:`, each starting with `- id: ...`",
            )
        )
    for key, value in data.items():
        if key in sc.HEADER_KEYS:
            if (
                key in ("description", "target", "dataset")
                and value is not None
                and not isinstance(value, str)
            ):
                diags.append(src.diagnostic((key,), f"`{key}` must be a string"))
            if key == "evaluator" and value not in (None, "llm_judge", "code"):
                diags.append(
                    src.diagnostic(
                        (key,),
                        f"unknown default evaluator {value!r}",
                        hint="valid choices: llm_judge, code",
                    )
                )
            continue
        if key == "grader":  # a slip for `evaluator` (other tools' word): say which key it is
            diags.append(grader_key(src, (key,)))
            continue
        diags.append(unknown_key(src, (key,), key, sc.HEADER_KEYS))
    return diags


class _CaseBuilder:
    """Turns one raw case mapping into an ``EvalCase`` (or diagnostics)."""

    def __init__(
        self,
        *,
        src: YamlSource,
        ctx: LoadContext,
        roots: list[Path],
        repo_root: Path,
        patterns: tuple[str, ...],
        dataset: str,
        default_evaluator: str,
    ) -> None:
        self.src = src
        self.ctx = ctx
        self.roots = roots
        self.repo_root = repo_root
        self.patterns = patterns
        self.dataset = dataset
        self.default_evaluator = default_evaluator
        self._classified: dict[Path, bool] = {}
        self._checked: dict[Path, tuple[bool, bool]] = {}  # path -> (inside root, is a file)
        self._warned_large: set[Path] = set()  # attachments already said to be large
        self._schemas = SchemaChecker()
        self._scripts: dict[tuple[str, Path], Problem | None] = {}
        # The file-level `execution:` block (the original AgentV's): the defaults of the
        # cases that have no target or evaluators of their own.
        self.execution_seen = False
        self.default_target: str | None = None
        self.default_evaluators: tuple[EvaluatorConfig, ...] | None = None
        self.default_diags: list[Diagnostic] = []  # its problems (header problems)

    def set_file_execution(self, value: Any) -> None:
        """Read the file-level ``execution:`` block: its ``target`` and ``evaluators``."""
        self.execution_seen = True
        self.default_target, self.default_evaluators, self.default_diags = None, None, []
        if value is None:
            return
        wrapped = {"execution": value}  # so that its errors are located under `execution`
        try:
            raw = sc.RawFileExecution.model_validate(wrapped)
        except ValidationError as exc:
            self.default_diags = translate(self.src, exc, wrapped, ())
            self._name_places(self.default_diags)
            return
        self.default_target = _text_or_none(raw.execution.target)
        if raw.execution.evaluators is not None:
            self.default_evaluators = tuple(
                self._evaluator_configs(
                    raw.execution.evaluators, ("execution", "evaluators"), self.default_diags
                )
            )
        self._name_places(self.default_diags)

    @staticmethod
    def _name_places(diags: list[Diagnostic]) -> None:
        """Start the messages about the file's ``execution`` with the key they are about.

        A streamed file's header is located by its top-level keys only (the file is not
        read twice), so the line is that of ``execution``: the key path says the rest.
        """
        for d in diags:
            if d.location and d.location != "execution":
                d.message = f"`{d.location}`: {d.message}"

    def build(
        self, index: int, entry: Any, line: int | None = None
    ) -> tuple[EvalCase | None, list[Diagnostic]]:
        """The case at ``evalcases[index]`` (starting on ``line``), or None when it has an
        error; plus diagnostics."""
        case, diags = self._build(index, entry, line)
        if isinstance(entry, dict):
            diags.extend(self._marker_warnings(entry, ("evalcases", index)))
        case_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(case_id, str) and case_id.strip():
            for d in diags:
                if d.file == self.src.path:
                    d.message = f"case {case_id!r}: {d.message}"
        diags.sort(key=lambda d: (d.line or 0, d.column or 0))
        return case, diags

    def _build(
        self, index: int, entry: Any, line: int | None
    ) -> tuple[EvalCase | None, list[Diagnostic]]:
        base: PathKey = ("evalcases", index)
        if not isinstance(entry, dict):
            return None, [
                self.src.diagnostic(
                    base,
                    "an eval case must be a mapping",
                    hint="start each case with `- id: ...` followed by `outcome` and `input_messages`",
                )
            ]
        try:
            raw = _CASE_ADAPTER.model_validate(entry)
        except ValidationError as exc:
            diags = translate(self.src, exc, entry, base)
            # Report the missing files too, so that one `validate` shows every problem.
            self._check_raw_files(entry, base, diags)
            return None, diags
        diags = []
        guideline_files: dict[Path, GuidelineFile] = {}
        input_files: dict[Path, None] = {}
        messages = []
        for i, msg in enumerate(raw.input_messages):
            loaded = self._message(
                msg, (*base, "input_messages", i), diags, guideline_files, input_files, True
            )
            messages.append(loaded)
        expected = []
        for i, msg in enumerate(raw.expected_messages or []):
            expected.append(
                self._message(msg, (*base, "expected_messages", i), diags, None, None, False)
            )
        diags.extend(self._check_tool_pairing(raw, base))
        evaluators = self._evaluators(raw, base, diags)
        if any(d.severity == "error" for d in diags):
            return None, diags
        case = EvalCase(
            id=raw.id,
            dataset=self.dataset,
            eval_file=self.src.path,
            outcome=raw.outcome,
            input_messages=tuple(messages),
            expected_messages=tuple(expected),
            reference_answer=_reference_answer(expected),
            guideline_files=tuple(guideline_files.values()),
            input_files=tuple(input_files),
            evaluators=tuple(evaluators),
            default_evaluator=raw.evaluator or self.default_evaluator,
            conversation_id=raw.conversation_id,
            target=raw.execution.target if raw.execution and raw.execution.target else None,
            line=line,
            repeat=raw.repeat,
        )
        return case, diags

    def _check_raw_files(
        self, entry: dict[str, Any], base: PathKey, diags: list[Diagnostic]
    ) -> None:
        for field_name in ("input_messages", "expected_messages"):
            for i, msg in _enumerate_list(entry.get(field_name)):
                content = msg.get("content") if isinstance(msg, dict) else None
                for j, block in _enumerate_list(content):
                    value = block.get("value") if isinstance(block, dict) else None
                    if block_is_file(block) and isinstance(value, str) and value:
                        key = (*base, field_name, i, "content", j, "value")
                        self._file(value, key, diags, classify=False)

    def _marker_warnings(self, entry: dict[str, Any], base: PathKey) -> list[Diagnostic]:
        """Warn about ``@[Role]:`` written inside content: it can pass for a real turn."""
        out: list[Diagnostic] = []
        for field_name in ("input_messages", "expected_messages"):
            for i, msg in _enumerate_list(entry.get(field_name)):
                if not isinstance(msg, dict):
                    continue
                content = msg.get("content")
                # (where, text): a location is only spelled out for a text with a marker
                texts: list[tuple[tuple[Any, ...], Any]] = [((), content)]
                for j, block in _enumerate_list(content):
                    if isinstance(block, dict) and block.get("type") == "text":
                        texts.append(((j, "value"), block.get("value")))
                    else:
                        texts.append(((j,), block))
                for where, text in texts:
                    # Every marker starts with "@[": the substring test spares most texts the regex.
                    if not (isinstance(text, str) and "@[" in text):
                        continue
                    found = ROLE_MARKER_RE.search(text)
                    if found:
                        out.append(
                            self.src.diagnostic(
                                (*base, field_name, i, "content", *where),
                                f"content contains the role marker {found.group(0)!r}",
                                hint="agentv writes role markers itself; one inside content can "
                                "pass for a real turn (prompt injection). Rephrase it unless the "
                                "case tests exactly that",
                                severity="warning",
                            )
                        )
        return out

    def _message(
        self,
        msg: sc.RawMessage,
        key: PathKey,
        diags: list[Diagnostic],
        guidelines: dict[Path, GuidelineFile] | None,
        input_files: dict[Path, None] | None,
        classify: bool,
    ) -> Message:
        segments: list[Segment] = []
        if isinstance(msg.content, str):
            segments.append(TextSegment(msg.content))
        else:
            for j, block in enumerate(msg.content):
                if isinstance(block, sc.TextBlock):
                    segments.append(TextSegment(block.value))
                    continue
                seg = self._file(block.value, (*key, "content", j, "value"), diags, classify)
                if seg is None:
                    continue
                segments.append(seg)
                if isinstance(seg, GuidelineRef):
                    if guidelines is not None and seg.resolved not in guidelines:
                        guidelines[seg.resolved] = GuidelineFile(
                            seg.path, seg.resolved, self.ctx.store.text(seg.resolved)
                        )
                elif input_files is not None:
                    input_files.setdefault(seg.resolved, None)
        tool_calls: tuple[ToolCall, ...] = ()
        if msg.tool_calls:
            calls = []
            for k, call in enumerate(msg.tool_calls):
                args = call.arguments
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError as exc:
                        diags.append(
                            self.src.diagnostic(
                                (*key, "tool_calls", k, "arguments"),
                                f"tool call arguments are not valid JSON: {exc.msg} "
                                f"at character {exc.pos + 1}",
                                hint="write the arguments as a YAML mapping instead of a string",
                            )
                        )
                        args = {}
                    except RecursionError:
                        diags.append(
                            self.src.diagnostic(
                                (*key, "tool_calls", k, "arguments"),
                                "tool call arguments are nested too deeply",
                                hint="write the arguments as a YAML mapping instead of a string",
                            )
                        )
                        args = {}
                    if not isinstance(args, dict):
                        diags.append(
                            self.src.diagnostic(
                                (*key, "tool_calls", k, "arguments"),
                                "tool call arguments must be a JSON object",
                            )
                        )
                        args = {}
                calls.append(ToolCall(call.id, call.name, args))
            tool_calls = tuple(calls)
            if msg.role != "assistant":
                diags.append(
                    self.src.diagnostic(
                        (*key, "tool_calls"),
                        f"`tool_calls` is only allowed on assistant messages, not on {msg.role!r}",
                        hint="move the tool calls to the assistant turn that made them",
                    )
                )
        if msg.tool_call_id is not None and msg.role != "tool":
            diags.append(
                self.src.diagnostic(
                    (*key, "tool_call_id"),
                    "`tool_call_id` is only allowed on tool messages",
                    hint="set it on the `role: tool` message that answers the call",
                )
            )
        return Message(
            role=msg.role,
            segments=tuple(segments),
            tool_calls=tool_calls,
            tool_call_id=msg.tool_call_id,
            name=msg.name,
        )

    def _file(
        self, raw: str, key: PathKey, diags: list[Diagnostic], classify: bool
    ) -> Segment | None:
        found = self._read_reference(raw, key, diags, "referenced file")
        if found is None:
            return None
        path, text = found
        if classify and self._is_guideline(path):
            return GuidelineRef(path=raw, resolved=path)
        return FileSegment(path=raw, resolved=path, text=text)

    def _read_reference(
        self, raw: str, key: PathKey, diags: list[Diagnostic], what: str, *, must_exist: bool = True
    ) -> tuple[Path, str] | None:
        """Resolve, check and read a file reference; problems become diagnostics."""
        res = self.ctx.store.resolve(raw, self.roots)
        if res.resolved is None:
            if must_exist:
                tried = "\n".join(f"      {p}" for p in res.tried)
                diags.append(
                    self.src.diagnostic(
                        key,
                        f"{what} not found: {raw}",
                        hint=f"create the file or fix the path; looked in:\n{tried}",
                    )
                )
            return None
        path = res.resolved
        checked = self._checked.get(path)
        if checked is None:  # one check per file per eval file, however many cases use it
            inside = self.ctx.allow_outside_root or is_within(path, self.repo_root)
            checked = self._checked[path] = (inside, path.is_file())
        inside, is_file = checked
        if not inside:
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} resolves outside the repository root ({path})",
                    hint=f"keep referenced files inside {self.repo_root}, or pass "
                    "--allow-outside-root if you trust this eval file",
                )
            )
            return None
        if not is_file:
            diags.append(
                self.src.diagnostic(
                    key, f"{what} {raw} is a folder, not a file", hint="point at a file"
                )
            )
            return None
        try:
            text = self.ctx.store.text(path)
        except UnicodeDecodeError as exc:
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} is {describe_decode_error(exc)}",
                    hint="reference text files only, saved as UTF-8",
                )
            )
            return None
        except OSError as exc:
            diags.append(
                self.src.diagnostic(
                    key,
                    f"cannot read {what} {raw}: {exc.strerror or exc}",
                    hint="check the file's permissions",
                )
            )
            return None
        if len(text) > LARGE_ATTACHMENT and path not in self._warned_large:
            self._warned_large.add(path)  # said once per file, however many cases use it
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} is {len(text) / 2**20:.0f} MiB of text: it is sent whole "
                    "with every request of the cases that attach it",
                    hint="attach an excerpt if the whole file is not needed (it costs "
                    "tokens, time and memory); results store it once per record",
                    severity="warning",
                )
            )
        return path, text

    def _is_guideline(self, path: Path) -> bool:
        hit = self._classified.get(path)
        if hit is None:
            try:
                rel = path.relative_to(self.repo_root).as_posix()
            except ValueError:
                rel = "../" + path.as_posix()  # outside the root: never a guideline
            hit = is_guideline(rel, self.patterns)
            self._classified[path] = hit
        return hit

    def _check_tool_pairing(self, raw: sc.RawEvalCase, base: PathKey) -> list[Diagnostic]:
        diags: list[Diagnostic] = []
        call_ids: set[str] = set()
        for i, msg in enumerate(raw.input_messages):
            if msg.tool_calls:
                call_ids.update(c.id for c in msg.tool_calls)
            if msg.role == "tool" and (
                msg.tool_call_id is None or msg.tool_call_id not in call_ids
            ):
                why = (
                    "has no `tool_call_id`"
                    if msg.tool_call_id is None
                    else f"answers call {msg.tool_call_id!r}, which no earlier assistant message made"
                )
                diags.append(
                    self.src.diagnostic(
                        (*base, "input_messages", i),
                        f"tool message {why}; it will be sent to LM APIs as a user turn starting with @[Tool]:",
                        hint="add `tool_calls` with a matching `id` to the assistant message before it "
                        "and set `tool_call_id` here",
                        severity="warning",
                    )
                )
        return diags

    def _evaluators(
        self, raw: sc.RawEvalCase, base: PathKey, diags: list[Diagnostic]
    ) -> list[EvaluatorConfig]:
        if raw.execution is not None and raw.execution.evaluators is not None:
            specs = raw.execution.evaluators
            key: PathKey = (*base, "execution", "evaluators")
        elif raw.evaluators is not None:
            specs, key = raw.evaluators, (*base, "evaluators")
        else:  # none of its own: the file's `execution.evaluators`, checked once
            return list(self.default_evaluators or ())
        return self._evaluator_configs(specs, key, diags)

    def _evaluator_configs(
        self, specs: list[sc.EvaluatorSpec], key: PathKey, diags: list[Diagnostic]
    ) -> list[EvaluatorConfig]:
        """The evaluators listed at ``key``, their files resolved and their settings checked
        as they will be used when grading (``checks.py``)."""
        out: list[EvaluatorConfig] = []
        seen: set[str] = set()
        for k, spec in enumerate(specs):
            name = spec.name or spec.type
            if name in seen:
                name = f"{name}_{k + 1}"
            seen.add(name)
            cwd = prompt_path = None
            prompt_text = None
            if isinstance(spec, sc.CodeSpec) and spec.cwd:
                res = self.ctx.store.resolve(spec.cwd, [self.src.path.parent])
                if res.resolved is None or not res.resolved.is_dir():
                    diags.append(
                        self.src.diagnostic(
                            (*key, k, "cwd"),
                            f"code evaluator folder not found: {spec.cwd}",
                            hint=f"`cwd` is relative to the eval file's folder ({self.src.path.parent})",
                        )
                    )
                elif not (
                    self.ctx.allow_outside_root or is_within(res.resolved, self.repo_root)
                ):  # as every other path: the script would run there
                    diags.append(
                        self.src.diagnostic(
                            (*key, k, "cwd"),
                            f"code evaluator folder {spec.cwd} resolves outside the "
                            f"repository root ({res.resolved})",
                            hint=f"keep the evaluator's `cwd` inside {self.repo_root}, or pass "
                            "--allow-outside-root if you trust this eval file",
                        )
                    )
                else:
                    cwd = res.resolved
            elif isinstance(spec, sc.CodeSpec):
                cwd = self.src.path.parent
            if isinstance(spec, sc.LlmJudgeSpec) and spec.prompt:
                prompt_text, prompt_path = self._judge_prompt(
                    spec.prompt, (*key, k, "prompt"), diags
                )
            problem = self._check_spec(spec, cwd)
            if problem is not None:
                diags.append(
                    self.src.diagnostic((*key, k, problem.key), problem.message, hint=problem.hint)
                )
            out.append(
                EvaluatorConfig(
                    name, spec, cwd=cwd, prompt_text=prompt_text, prompt_path=prompt_path
                )
            )
        return out

    def _check_spec(self, spec: sc.EvaluatorSpec, cwd: Path | None) -> Problem | None:
        """What would make this evaluator fail on every answer: found now, before spending."""
        if isinstance(spec, sc.RegexSpec):
            return regex_problem(spec.value, spec.flags)
        if isinstance(spec, sc.IsJsonSpec):
            return self._schemas.problem(spec.schema_, self.src.path.parent)
        if isinstance(spec, sc.CodeSpec) and cwd is not None:  # a missing `cwd` is reported
            where = (spec.script, cwd)
            if where not in self._scripts:  # one look at the disk per script per file
                self._scripts[where] = script_problem(spec.script, cwd)
            return self._scripts[where]
        return None

    def _judge_prompt(
        self, prompt: str, key: PathKey, diags: list[Diagnostic]
    ) -> tuple[str, Path | None]:
        """A judge prompt is a file when one resolves, else inline text (as the original AgentV: docs/architecture.md, "Compatibility")."""
        if "\n" in prompt:
            return prompt, None
        # A single line ending like a file name was meant as a file: say so when it is missing.
        looks_like_path = prompt.strip().lower().endswith((".md", ".txt", ".prompt"))
        found = self._read_reference(
            prompt.strip(), key, diags, "judge prompt file", must_exist=looks_like_path
        )
        if found is None:
            return prompt, None
        path, text = found
        return text, path


def _reference_answer(expected: list[Message]) -> str:
    """The first expected message's content: a string as written, blocks joined by a space."""
    if not expected:
        return ""
    first = expected[0]
    if len(first.segments) == 1 and isinstance(first.segments[0], TextSegment):
        return first.segments[0].value
    parts = []
    for seg in first.segments:
        if isinstance(seg, TextSegment):
            parts.append(seg.value)
        elif isinstance(seg, FileSegment):
            parts.append(seg.text)
    return " ".join(parts)
