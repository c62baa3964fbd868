"""Step 1 of the data flow: read an eval file (``$schema: agentv-eval-v2``) and settle it.

Each case is built by ``evalfile.build.CaseBuilder``; this module reads the file once
(streaming, or whole), checks its header, ids and file-level defaults, and hands out the
cases (``load_eval_file``, ``iter_cases``).

Every problem is collected as a ``Diagnostic`` with its file, line and column. A case with
an error cannot run: it is kept as an ``InvalidCase`` (its result says why) and the others
still run. What can be known before the first request is checked here, so that ``eval``
and ``validate`` say it alike: referenced files, duplicate ids, regex patterns, JSON
Schemas, code evaluators' scripts (each evaluator's ``check``). A file that cannot be used at all (bad
YAML, wrong ``$schema``, no ``evalcases`` list, a broken header) raises ``InputError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from agentv.cases import EvalCase, InvalidCase
from agentv.errors import Diagnostic, DiagnosticsView, InputError
from agentv.evalfile import schema as sc
from agentv.evalfile.build import CaseBuilder, text_or_none
from agentv.evalfile.context import LoadContext
from agentv.evalfile.files import find_repo_root, search_roots
from agentv.evalfile.schema_errors import grader_key, unknown_key
from agentv.evalfile.spool import CaseSpool
from agentv.evalfile.variables import Vars, VarsError, case_id, combinations, combine, parse_vars
from agentv.system.readfile import resolved
from agentv.yaml.source import StreamSource, YamlSource, read_error
from agentv.yaml.stream import NotUtf8Error, StreamResult, stream_yaml


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
    user_targets: frozenset[str] = frozenset()  # the targets of the cases' simulated users
    #: how many usable cases have each `repeat:` value of their own (None: none)
    case_repeats: dict[int | None, int] = field(default_factory=dict)
    #: one per case entry (of `eval_id`, when given) with an error, in file order; kept even
    #: when the usable cases are `streamed` (a file has few of them)
    invalid: list[InvalidCase] = field(default_factory=list)
    repeat: int | None = None  # the file's `repeat`: runs of each case without its own
    #: the cases of the file's `rows:` not in `cases`/`invalid`: built as they are read
    #: (a run), or again at each reading (a check); ``iter_entries`` gives them
    rows: CaseStream | None = None
    rows_source: Path | None = None  # the data file `rows:` reads (None: none, a dataset)
    invalid_rows: int = 0  # the rows' cases found invalid when the file was loaded
    row_cases: int = 0  # the cases the rows make (``total_cases`` counts them too)


def load_eval_file(
    path: Path | str,
    *,
    eval_id: str | None = None,
    context: LoadContext | None = None,
    keep_limit: int | None = None,
    text: str | None = None,
    check_only: bool = False,
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

    The cases a file's ``rows:`` make (``evalfile.rowcases``) are all read and checked
    now, unless ``keep_limit`` is given (a run): then they are built as the run asks for
    them (``iter_entries``), the first request leaving before the data is read to the end.
    With ``check_only`` (``validate``) they are checked now and not kept: reading them
    again builds them again.
    """
    load = _FileLoad(
        resolved(Path(path)), context or LoadContext(), eval_id, keep_limit, check_only
    )
    return load.load(text)


def iter_cases(
    loaded: LoadedEvalFile, *, eval_id: str | None = None, context: LoadContext | None = None
) -> Iterator[EvalCase]:
    """The usable cases of a file, one at a time: those kept in memory, or those of its
    spool (``keep_limit``). Their problems were reported when the file was loaded; the
    invalid cases are in ``loaded.invalid``. ``eval_id`` and ``context`` were applied when
    it was loaded; they are accepted for the callers that pass them along."""
    for entry in iter_entries(loaded):
        if isinstance(entry, EvalCase):
            yield entry


def iter_entries(loaded: LoadedEvalFile) -> Iterator[EvalCase | InvalidCase]:
    """The usable cases of a file, one at a time (as ``iter_cases``), then the cases its
    ``rows:`` make that were not built when it was loaded, invalid ones included (those
    found then are in ``loaded.invalid``)."""
    spool = loaded.spool
    if spool is None:
        yield from loaded.cases
    else:
        settle = loaded.settle
        for case, flags in spool.cases():
            assert isinstance(case, EvalCase)
            yield case if settle is None else settle(case, flags)
    if loaded.rows is not None:
        yield from loaded.rows.entries()


if TYPE_CHECKING:  # cases from data: imported when a file has rows or variables
    from agentv.evalfile.rowcases import CaseStream, RowPlan

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
        check_only: bool = False,
    ) -> None:
        self.path = path
        self.ctx = ctx
        self.eval_id = eval_id
        self.keep_limit = keep_limit
        self.check_only = check_only
        #: the file's `vars` as read when the first case came (None: none by then)
        self.file_vars: Vars | None = None
        self.vars_diags: list[Diagnostic] = []
        self._vars_seen = False
        self.stream = StreamResult(data=None)
        self.src = StreamSource(path, self.stream, _STREAM_KEY)
        self.repo_root = find_repo_root(path.parent, ctx.cwd)
        self._builder: CaseBuilder | None = None
        self.config_diags: list[Diagnostic] = []
        self.cases: list[EvalCase] = []
        # for each kept case: whether it uses the file's `evaluator`, `execution.evaluators`,
        # `tools` and `workspace` (`_add`)
        self._flags: list[tuple[bool, bool, bool, bool]] = []
        self.own_workspaces = 0  # usable cases with a `workspace:` of their own
        #: cases whose graders need a workspace, built before any file-level one was read
        self._deferred: list[tuple[EvalCase, int, int, Diagnostic]] = []
        self.invalid: list[InvalidCase] = []
        self.diags: list[Diagnostic] = []
        self.count = 0  # usable cases seen
        self.case_targets: set[str | None] = set()  # their `execution.target` values
        self.user_targets: set[str] = set()  # their simulated users' targets
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
        header_diags += builder.default_diags + builder.tools_diags + builder.workspace_diags
        target = text_or_none(data.get("target"))
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
        header_diags += self.vars_diags
        if "vars" in data and self.stream.items and not self._vars_seen:
            header_diags.append(
                self.src.diagnostic(
                    ("vars",),
                    "`vars` is written after `evalcases`",
                    hint="move `vars:` above `evalcases:`: cases are filled as they are read",
                    at_key=True,
                )
            )
        row_plan: RowPlan | None = None
        if "rows" in data or "template" in data:
            from agentv.evalfile.rowcases import plan_rows

            row_plan, row_diags = plan_rows(
                data=data,
                eval_path=self.path,
                template_src=YamlSource(self.path, text, data),
                builder=builder,
                ctx=self.ctx,
                file_vars=self.file_vars or [],
                eval_id=self.eval_id,
            )
            header_diags += row_diags
        twice = self._written_twice(text)
        if any(d.severity == "error" for d in header_diags):
            raise InputError(
                f"{self.path}: not a usable eval file",
                header_diags + twice + self.config_diags + self.diags,
            )
        loaded = LoadedEvalFile(
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
            user_targets=frozenset(self.user_targets),
            case_repeats=dict(self.case_repeats),
            invalid=self.invalid,
            repeat=data.get("repeat") if isinstance(data.get("repeat"), int) else None,
        )
        if row_plan is not None:
            self._rows(loaded, row_plan)
        return loaded

    def _rows(self, loaded: LoadedEvalFile, plan: RowPlan) -> None:
        """Add the cases of the file's rows: read and kept now (a preview, the API),
        checked now and dropped (``check_only``), or built as a run asks for them
        (``keep_limit``), all but the first row then read while the run goes."""
        from agentv.evalfile.rowcases import CaseStream

        loaded.rows_source = plan.source.path
        loaded.case_targets = loaded.case_targets | {plan.target}
        if plan.user_target is not None:
            loaded.user_targets = loaded.user_targets | {plan.user_target}
        entries = plan.entries(check=self.check_only)
        usable = invalid = 0
        written_invalid = len(loaded.invalid)
        if self.keep_limit is None and not self.check_only:
            for entry in entries:
                if isinstance(entry, EvalCase):
                    loaded.cases.append(entry)
                    usable += 1
                else:
                    loaded.invalid.append(entry)
            self._rows_checked(loaded, plan)
        elif self.check_only:
            for entry in entries:
                if isinstance(entry, EvalCase):
                    usable += 1
                else:
                    invalid += 1
            self._rows_checked(loaded, plan)
            loaded.rows = CaseStream(plan.entries, shared=False, keep_limit=None)
            loaded.streamed = True
        else:
            stream = loaded.rows = CaseStream(plan.entries, shared=True, keep_limit=self.keep_limit)
            count = plan.quick_count()
            reading = stream.entries()
            first = next(reading, None)  # a template that fails every row stops the file now
            if plan.first_template_errors:
                raise InputError(
                    f"{self.path}: not a usable eval file",
                    loaded.diagnostics + plan.first_template_errors,
                )
            if count is None:  # `filter`, `sample`, `--eval-id`: every row read first
                for _ in reading:
                    pass
                count = stream.count
                loaded.diagnostics += plan.problems.diagnostics()
            else:
                loaded.diagnostics += plan.problems.diagnostics()
            usable = count if first is not None else 0
            loaded.streamed = True
        loaded.invalid_rows = invalid
        loaded.row_cases = usable + invalid + len(loaded.invalid) - written_invalid
        loaded.total_cases += loaded.row_cases
        loaded.case_count += usable
        if usable:
            loaded.case_repeats = {
                **loaded.case_repeats,
                plan.repeat: loaded.case_repeats.get(plan.repeat, 0) + usable,
            }

    def _rows_checked(self, loaded: LoadedEvalFile, plan: RowPlan) -> None:
        """Every row was read: a template that fails every row makes the file unusable,
        and the rows' problems join the file's."""
        if plan.first_template_errors:
            raise InputError(
                f"{self.path}: not a usable eval file",
                loaded.diagnostics + plan.first_template_errors,
            )
        loaded.diagnostics += plan.problems.diagnostics()

    def _written_twice(self, text: str | None) -> list[Diagnostic]:
        """Keys the file writes twice in one mapping (the first is silently dropped: two
        `execution:` blocks in a case, say), with the context's ``keys_twice`` severity."""
        if not self.stream.duplicate_keys:
            return []
        twice = YamlSource(self.path, text, None, stream_duplicates=self.stream.duplicate_keys)
        return [replace(d, severity=self.ctx.keys_twice) for d in twice.duplicate_keys()]

    def builder(self) -> CaseBuilder:
        """The case builder, made at the first case from the header read by then."""
        if self._builder is None:
            # The header read so far: the same dict goes on filling as the file is read.
            self.src.data = self.stream.data
            header = self.stream.data
            config, self.config_diags = self.ctx.guidelines.for_eval_dir(
                self.path.parent, self.repo_root
            )
            self._builder = CaseBuilder(
                src=self.src,
                ctx=self.ctx,
                roots=search_roots(self.path.parent, self.repo_root, self.ctx.cwd),
                repo_root=self.repo_root,
                patterns=config.patterns,
                dataset=_dataset(header, self.path),
                default_evaluator=_default_evaluator(header),
                user_target=_user_target(header) or config.user_target,
            )
            # Keys written before `evalcases` are complete when the first case comes.
            self._vars_seen = isinstance(header, dict) and "vars" in header
            if isinstance(header, dict) and "vars" in header:
                try:
                    self.file_vars = parse_vars(header["vars"])
                    combinations(self.file_vars)
                except VarsError as exc:
                    at = ("vars", exc.key) if exc.key else ("vars",)
                    self.vars_diags.append(self.src.diagnostic(at, exc.message, hint=exc.hint))
                    self.file_vars = None
            if isinstance(header, dict) and "execution" in header:
                self._builder.set_file_execution(header["execution"])
            if isinstance(header, dict) and "tools" in header:
                self._builder.set_file_tools(header["tools"])
            if isinstance(header, dict) and "workspace" in header:
                self._builder.set_file_workspace(header["workspace"])
        return self._builder

    def _build(
        self,
        index: int,
        entry: Any,
        line: int,
        combination: dict[str, Any] | None = None,
        problem: Diagnostic | None = None,
        base_id: str | None = None,
    ) -> EvalCase | None:
        """Build one case; its problems go to ``diags``, and a case with an error goes to
        ``invalid``. Returns None for a case that does not run. ``combination``: the
        variables it was filled with (its id carries them); ``problem``: why filling it
        failed; ``base_id``: its id as written (``--eval-id`` picks every combination)."""
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if self.eval_id is not None and self.eval_id not in (entry_id, base_id):
            return None
        builder = self.builder()
        if problem is not None:
            if isinstance(entry_id, str) and entry_id.strip():
                problem.message = f"case {entry_id!r}: {problem.message}"
            case, case_diags = None, [problem]
        else:
            case, case_diags = builder.build(index, entry, line)
        if isinstance(entry_id, str) and entry_id:
            first = self._first_seen.setdefault(entry_id, (index, line))
            if first[0] != index:
                # Results and --eval-id name cases by id: a second case with it cannot run.
                case = None
                case_diags.append(_duplicate_id(self.src, index, entry_id, first[1]))
        self.diags.extend(case_diags)
        problem = builder.deferred.pop(index, None)
        if problem is not None and case is not None:
            self._deferred.append((case, index, line, problem))
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
            target, repeat = _planned(entry)
            self.invalid.append(
                InvalidCase(
                    eval_file=self.path,
                    dataset=builder.dataset,
                    index=index,
                    id=usable_id,
                    line=line,
                    diagnostics=tuple(d for d in case_diags if d.severity == "error"),
                    target=target or builder.default_target,
                    repeat=repeat,
                    vars=combination or None,
                )
            )
        elif combination:
            case = replace(case, vars=combination)
        return case

    def _add(self, index: int, entry: Any, line: int) -> None:
        """Build one case (one per combination of its variables) and keep it: in memory,
        or in a spool on disk once more than ``keep_limit`` cases were seen."""
        self.builder()  # the file's `vars`, as read so far
        own = entry.get("vars") if isinstance(entry, dict) else None
        if self.file_vars is None and own is None:
            self._keep(entry, self._build(index, entry, line))
            return
        assert isinstance(entry, dict)
        written = _without(entry, "vars")
        try:
            variables = combine(self.file_vars, parse_vars(own) if own is not None else None)
            chosen = combinations(variables)
        except VarsError as exc:
            at = ("evalcases", index, "vars", exc.key) if exc.key else ("evalcases", index)
            problem = self.src.diagnostic(at, exc.message, hint=exc.hint)
            self._build(index, written, line, None, problem)
            return
        from agentv.evalfile.template import RenderError, compile_tree

        tree = compile_tree(written)
        base = entry.get("id")
        for combination in chosen:
            filled: Any = written
            problem = None
            if tree.errors:
                path, error = tree.errors[0]
                problem = self.src.diagnostic(
                    ("evalcases", index, *path), error.message, hint=error.hint
                )
            else:
                try:
                    filled = tree.render(combination)
                except RenderError as exc:
                    problem = self.src.diagnostic(
                        ("evalcases", index, *exc.leaf.path),
                        exc.error.message,
                        hint=exc.error.hint
                        or "the variables are those under `vars:` (the file's and the case's)",
                    )
            named = isinstance(base, str) and bool(base.strip())
            if named:
                filled = {**filled, "id": case_id(base, combination)}
            case = self._build(index, filled, line, combination, problem, base if named else None)
            self._keep(written, case)

    def _keep(self, entry: Any, case: EvalCase | None) -> None:
        """Keep a built case (``entry`` is the case as written)."""
        if case is None:
            return
        self.count += 1
        self.case_targets.add(case.target)
        if case.user is not None:
            self.user_targets.add(case.user.target)
        self.case_repeats[case.repeat] = self.case_repeats.get(case.repeat, 0) + 1
        # whether the file's `evaluator`, `execution.evaluators` and `tools` apply to it (a
        # header key written after the cases changes those that use it: `_settle`)
        own_workspace = isinstance(entry, dict) and "workspace" in entry
        self.own_workspaces += own_workspace
        flags = (
            not (isinstance(entry, dict) and entry.get("evaluator")),
            not _has_own_evaluators(entry),
            not (isinstance(entry, dict) and "tools" in entry),
            not own_workspace,
        )
        spool = self.spool
        if spool is None and self.keep_limit is not None and self.count > self.keep_limit:
            spool = self.spool = CaseSpool()  # too many to hold: on disk from now on
            for kept, kept_flags in zip(self.cases, self._flags, strict=True):
                spool.add(kept, *kept_flags)
            self.cases = []
            self._flags.clear()
        if spool is not None:
            spool.add(case, *flags)
            return
        self.cases.append(case)
        self._flags.append(flags)

    def _settle(self, data: dict[str, Any]) -> None:
        """Apply ``dataset``, ``evaluator``, ``execution`` and ``tools`` written after the
        cases to the kept ones (and ``dataset`` to the invalid ones); spooled cases get it
        as they are read back (``settle``).

        The builder is made here for a file without cases, so that a broken guideline
        config is reported for it too.
        """
        builder = self.builder()
        tools = None
        if not builder.tools_seen and data.get("tools") is not None:
            builder.set_file_tools(data["tools"])  # written after the cases
            tools = builder.default_tools
        evaluators = None
        if not builder.execution_seen and data.get("execution") is not None:
            builder.set_file_execution(data["execution"])
            evaluators = builder.default_evaluators
        workspace = None
        if not builder.workspace_seen and data.get("workspace") is not None:
            builder.set_file_workspace(data["workspace"])  # written after the cases
            workspace = builder.default_workspace
            if self.own_workspaces:
                # a case's own block was read before the file's it is merged over
                builder.workspace_diags.append(
                    self.src.diagnostic(
                        ("workspace",),
                        "the file's `workspace:` is written after cases that have a "
                        "`workspace:` of their own, which are merged over it",
                        hint="move the file's `workspace:` above `evalcases:`",
                        at_key=True,
                    )
                )
        dataset, default = _dataset(data, self.path), _default_evaluator(data)
        renamed = (dataset, default) != (builder.dataset, builder.default_evaluator)
        if renamed:
            builder.dataset, builder.default_evaluator = dataset, default
            self.invalid = [replace(bad, dataset=dataset) for bad in self.invalid]
        if builder.default_workspace is None:
            self._without_workspace(builder.dataset)
        if tools is None and evaluators is None and workspace is None and not renamed:
            return

        def settle(case: EvalCase, flags: tuple[bool, ...]) -> EvalCase:
            uses_default, uses_evaluators, uses_tools, uses_workspace = flags
            changes: dict[str, Any] = {}
            if tools is not None and uses_tools:
                changes["tools"] = tools
            if workspace is not None and uses_workspace:
                changes["workspace"] = workspace
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
            settle(case, flags) for case, flags in zip(self.cases, self._flags, strict=True)
        ]

    def _without_workspace(self, dataset: str) -> None:
        """The cases whose graders grade a workspace the file turned out not to give them:
        invalid, said at the case (a case already in the spool keeps the problem for its
        evaluator to say when it grades)."""
        if not self._deferred or self.spool is not None:
            return
        bad = {id(case): (case, index, line, d) for case, index, line, d in self._deferred}
        kept = [(c, f) for c, f in zip(self.cases, self._flags, strict=True) if id(c) not in bad]
        for case, index, line, diag in bad.values():
            diag.message = f"case {case.id!r}: {diag.message}"
            self.diags.append(diag)
            self.count -= 1
            self.case_repeats[case.repeat] -= 1
            self.invalid.append(
                InvalidCase(
                    eval_file=self.path,
                    dataset=self.builder().dataset,
                    index=index,
                    id=case.id,
                    line=line,
                    diagnostics=(diag,),
                    target=case.target or self.builder().default_target,
                    repeat=case.repeat,
                )
            )
        self.cases = [c for c, _ in kept]
        self._flags = [f for _, f in kept]
        self._deferred = []


def _without(entry: Any, key: str) -> Any:
    """``entry`` without ``key`` (the same mapping when it has none)."""
    if isinstance(entry, dict) and key in entry:
        return {k: v for k, v in entry.items() if k != key}
    return entry


def _planned(entry: Any) -> tuple[str | None, int | None]:
    """A case's own ``execution.target`` and ``repeat``, where they can be read from a case
    that cannot be built (its results name the target and runs it was written for)."""
    if not isinstance(entry, dict):
        return None, None
    execution = entry.get("execution")
    target = execution.get("target") if isinstance(execution, dict) else None
    repeat = entry.get("repeat")
    usable = isinstance(repeat, int) and not isinstance(repeat, bool) and 1 <= repeat <= 1000
    return (
        target if isinstance(target, str) and target.strip() else None,
        repeat if usable else None,
    )


def _dataset(header: Any, path: Path) -> str:
    value = header.get("dataset") if isinstance(header, dict) else None
    return text_or_none(value) or path.stem or "eval"


def _user_target(header: Any) -> str | None:
    value = header.get("user_target") if isinstance(header, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _default_evaluator(header: Any) -> str:
    value = header.get("evaluator") if isinstance(header, dict) else None
    return value if value in ("llm_judge", "code") else "llm_judge"


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
    from_rows = "rows" in data or "template" in data
    if not isinstance(data.get("evalcases"), list) and not (from_rows and "evalcases" not in data):
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
