"""Cases from data: each row of a ``rows:`` source fills the file's ``template`` (once per
combination of its variables) and becomes a case, built as a written one is
(docs/eval-files.md, "Cases from data").

Rows are read, filled and built one at a time, as they are asked for (``CaseStream``):
a run's first request leaves after its first row is built, and memory stays that of a
few cases. Every reader (one per target of a run) reads the same cases: the first to
need a case builds it, the others get it back from memory, or, beyond ``keep_limit``
cases, from a spool on disk (``spool.py``).

A row with a problem becomes an ``InvalidCase`` (its run gets an ``invalid`` result) and
the others go on. Each problem names the data file, the row's line (its number for
formats without lines) and the column; the same problem in many rows is said once
(``RowProblems``), with how many rows have it. A problem in the template's own text (an
unknown key, a role that does not exist) is located in the eval file.
"""

from __future__ import annotations

import difflib
import random
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentv.cases import EvalCase, InvalidCase, RowRef
from agentv.errors import Diagnostic
from agentv.evalfile import schema as sc
from agentv.evalfile.build import CaseBuilder, text_or_none
from agentv.evalfile.context import LoadContext
from agentv.evalfile.files import is_within, search_roots
from agentv.evalfile.rows import DataError, DataSource, Row, open_source
from agentv.evalfile.schema_errors import translate, unknown_key
from agentv.evalfile.spool import CaseSpool, SpoolReader
from agentv.evalfile.template import (
    ENV,
    Leaf,
    RenderError,
    TemplateError,
    Tree,
    compile_leaf,
    compile_tree,
    is_template,
    text_of,
)
from agentv.evalfile.variables import (
    Vars,
    VarsError,
    case_id,
    combinations,
    combine,
    parse_vars,
)
from agentv.yaml.source import PathKey, YamlSource, format_key

#: distinct problems kept per file; beyond, they are counted only
MAX_PROBLEMS = 200
#: rows named after a problem said once for many rows
ROWS_NAMED = 5
#: names a template may read besides the columns and variables
ROW_NAME = "row"
GLOBALS = frozenset(ENV.globals) | {ROW_NAME}

Entry = EvalCase | InvalidCase


class RowSite(YamlSource):
    """Where the problems of a case built from a row are located: in the data file at the
    row (and named by their column) when they come from a filled string, else in the
    eval file's template.

    It stands as the ``src`` of the ``CaseBuilder`` that builds row cases: ``path`` is the
    eval file (cases belong to it; folders are relative to it).
    """

    def __init__(
        self, path: Path, template_src: YamlSource, source: DataSource, tree: Tree
    ) -> None:
        super().__init__(path=path, text=None, data=None)
        self.template_src = template_src
        self.source = source
        self.tree = tree
        self.row: Row | None = None
        self.context: dict[str, Any] = {}
        self.variables: dict[str, Any] = {}

    def diagnostic(
        self,
        key: PathKey,
        message: str,
        *,
        hint: str | None = None,
        severity: str = "error",
        at_key: bool = False,
    ) -> Diagnostic:
        """The problem at ``key`` of the case being built (``("evalcases", i, ...)``)."""
        path = key[2:] if key[:1] == ("evalcases",) else key
        leaf = None if at_key else self.tree.leaf_for(path)  # a key is the template's own
        if leaf is None or self.row is None:
            return self.template_src.diagnostic(
                ("template", *path), message, hint=hint, severity=severity, at_key=at_key
            )
        about = self.about(leaf)
        if message.endswith("must not be empty") and leaf.bare in self.context:
            message = f"{about} is empty"
            hint = hint or (
                f"`{format_key(path)}` needs a value: fill it in, or leave such rows out "
                "with `filter`"
            )
        else:
            message = f"{about}: {message}"
        return self.at_row(self.row, message, hint, severity)

    def about(self, leaf: Leaf) -> str:
        """``column 'capital'``: what a filled string was made from."""
        columns = [n for n in sorted(leaf.names) if n in self.context and n not in self.variables]
        variables = [n for n in sorted(leaf.names) if n in self.variables]
        parts = []
        if columns:
            parts.append(_named("column", columns))
        if variables:
            parts.append(_named("variable", variables))
        return " and ".join(parts) or f"`template.{format_key(leaf.path)}`"

    def at_row(
        self, row: Row, message: str, hint: str | None = None, severity: str = "error"
    ) -> Diagnostic:
        """A problem of ``row``, located in the data file."""
        source = self.source
        return Diagnostic(
            source.path if source.path is not None else Path(source.label),
            message,
            severity=severity,  # type: ignore[arg-type]
            line=row.line,
            hint=hint,
            location=f"row {row.number}",
        )


def _named(kind: str, names: list[str]) -> str:
    quoted = ", ".join(repr(n) for n in names)
    return f"{kind}{'s' if len(names) > 1 else ''} {quoted}"


@dataclass
class _Problem:
    diag: Diagnostic
    rows: list[Row] = field(default_factory=list)  # the first few other rows with it
    others: int = 0  # how many other rows have it


@dataclass
class RowProblems:
    """The problems of a file's rows, the same one said once with how many rows have it."""

    groups: dict[tuple[Any, ...], _Problem] = field(default_factory=dict)
    more: int = 0  # problems beyond MAX_PROBLEMS, counted only
    rows_with_errors: int = 0

    def add(self, diag: Diagnostic, row: Row) -> None:
        """One more row with ``diag``."""
        in_data = diag.location is not None and diag.location.startswith("row ")
        key = (
            str(diag.file),
            diag.message,
            diag.hint,
            diag.severity,
            None if in_data else (diag.line, diag.column),
        )
        found = self.groups.get(key)
        if found is not None:
            found.others += 1
            if len(found.rows) < ROWS_NAMED:
                found.rows.append(row)
            return
        if len(self.groups) >= MAX_PROBLEMS:
            self.more += 1
            return
        self.groups[key] = _Problem(diag)

    def diagnostics(self) -> list[Diagnostic]:
        """Each problem once, saying in how many more rows it is."""
        out = []
        for problem in self.groups.values():
            diag, count = problem.diag, problem.others
            if not count:
                out.append(diag)
                continue
            lines = [r.line for r in problem.rows]
            if all(line is not None for line in lines):
                listed = f"line{'s' if len(lines) > 1 else ''} " + ", ".join(map(str, lines))
            else:
                numbers = [r.number for r in problem.rows]
                listed = f"row{'s' if len(numbers) > 1 else ''} " + ", ".join(map(str, numbers))
            if count > len(problem.rows):
                listed += ", ..."
            more = f"{count:,} more row{'s' if count != 1 else ''}"
            out.append(replace(diag, message=f"{diag.message} (and in {more}: {listed})"))
        if self.more:
            out.append(
                Diagnostic(
                    out[-1].file if out else None,
                    f"{self.more:,} more problems in other rows are not listed",
                    hint="fix the ones above first",
                )
            )
        return out


class SeenIds:
    """The ids given so far, by hash (16 bytes a row), and the row of each: a repeated id
    is found without keeping the ids."""

    def __init__(self) -> None:
        self._size = 1 << 12
        self._hashes = array("q", bytes(8 * self._size))
        self._rows = array("q", bytes(8 * self._size))
        self._count = 0

    def add(self, case_id: str, row: int) -> int | None:
        """Record ``case_id`` for ``row``; the earlier row with the same id, if any."""
        h = hash(case_id) or 1
        mask = self._size - 1
        slot = h & mask
        hashes = self._hashes
        while hashes[slot]:
            if hashes[slot] == h:
                return self._rows[slot]
            slot = (slot + 1) & mask
        hashes[slot] = h
        self._rows[slot] = row
        self._count += 1
        if self._count * 2 > self._size:
            self._grow()
        return None

    def _grow(self) -> None:
        old = [(h, r) for h, r in zip(self._hashes, self._rows, strict=True) if h]
        self._size *= 2
        self._hashes = array("q", bytes(8 * self._size))
        self._rows = array("q", bytes(8 * self._size))
        mask = self._size - 1
        for h, r in old:
            slot = h & mask
            while self._hashes[slot]:
                slot = (slot + 1) & mask
            self._hashes[slot] = h
            self._rows[slot] = r


@dataclass
class RowPlan:
    """Everything that makes a file's rows into cases, settled when the file was loaded."""

    source: DataSource
    tree: Tree
    site: RowSite
    builder: CaseBuilder
    combinations: list[dict[str, Any]]  # [{}] without variables
    dataset: str
    eval_file: Path
    line: int | None  # the template's line in the eval file
    id_leaf: Leaf | None = None  # `rows.id` as a template
    id_column: str | None = None  # `rows.id` as a column
    filter_leaf: Leaf | None = None
    limit: int | None = None
    sample: tuple[int, int] | None = None  # (n, seed)
    eval_id: str | None = None
    target: str | None = None  # the template's `execution.target`
    repeat: int | None = None  # the template's `repeat`
    user_target: str | None = None  # the target of the template's simulated user
    needed: frozenset[str] | None = None  # the columns read (None: all)
    problems: RowProblems = field(default_factory=RowProblems)
    #: the first row's case had an error located in the template: every row would
    first_template_errors: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        #: the strings that are one placeholder alone: their value must not be empty
        self._bare = [leaf for leaf in self.tree.leaves.values() if leaf.bare is not None]
        leaves = list(self.tree.leaves.values())
        #: every string fills free text: its value is checked here, the case not rebuilt
        self._free = leaves if all(_free(self.tree.value, leaf.path) for leaf in leaves) else None
        self._probe: EvalCase | None = None  # the first case built without any problem
        self._checking = False

    def quick_count(self) -> int | None:
        """How many entries the rows make, when that is known without reading values."""
        if self.filter_leaf is not None or self.sample is not None or self.eval_id is not None:
            return None
        rows = self.source.count()
        if self.limit is not None:
            rows = min(rows, self.limit)
        return rows * len(self.combinations)

    def entries(self, check: bool = False) -> Iterator[Entry]:
        """Every row's cases (or invalid cases), in order, read now. With ``check`` (a
        file checked, its cases not kept), a row whose strings all fill free text (see
        ``_free``) with text that the first row's flawless case shows to be fine is
        not built again: the case it would make stands in for it."""
        self._checking = check
        chosen = self._sample() if self.sample is not None else None
        seen = SeenIds() if self.id_leaf is not None or self.id_column is not None else None
        kept = 0
        first = True
        for row in self.source.rows(self.needed):
            if chosen is not None and row.number not in chosen:
                continue
            if self.limit is not None and kept >= self.limit:
                return
            made = self._row_entries(row, seen)
            if made is None:
                continue  # left out by `filter`
            kept += 1
            for entry in made:
                if first and isinstance(entry, InvalidCase):
                    self.first_template_errors = [
                        d for d in entry.diagnostics if d.file == self.eval_file
                    ]
                first = False
                yield entry

    def _sample(self) -> set[int]:
        """The row numbers ``sample`` picks: ``n`` of the rows ``filter`` keeps, chosen by
        a reservoir drawn from ``seed`` (the same rows for the same file and seed)."""
        n, seed = self.sample  # type: ignore[misc]
        rng = random.Random(seed)
        picked: list[int] = []
        seen = 0
        for row in self.source.rows(self.needed):
            if self.filter_leaf is not None and row.values is not None:
                try:
                    if not self._passes(row):
                        continue
                except TemplateError:
                    pass  # kept: its case says what is wrong
            seen += 1
            if len(picked) < n:
                picked.append(row.number)
            else:
                j = rng.randrange(seen)
                if j < n:
                    picked[j] = row.number
        return set(picked)

    def _context(self, row: Row) -> dict[str, Any]:
        values = row.values or {}
        if ROW_NAME in values:
            return values
        return {**values, ROW_NAME: values}

    def _passes(self, row: Row) -> bool:
        assert self.filter_leaf is not None
        got = self.filter_leaf.render(self._context(row))
        text = got.strip().lower() if isinstance(got, str) else text_of(got)
        if text in ("true", "false", ""):
            return text == "true"
        raise TemplateError(
            f"`rows.filter` gave {text_of(got)[:60]!r}, not true or false",
            hint="write a test: {{ difficulty == 'hard' }}",
        )

    def _row_entries(self, row: Row, seen: SeenIds | None) -> list[Entry] | None:
        site = self.site
        site.row = row
        site.variables = {}
        base = str(row.number) if seen is None else None
        if row.problem is not None:
            site.context = {}
            return self._invalid_all(row, base, site.at_row(row, row.problem, row.hint))
        context = site.context = self._context(row)
        if self.filter_leaf is not None:
            try:
                if not self._passes(row):
                    return None
            except TemplateError as exc:
                return self._invalid_all(row, base, self._render_problem(row, "`rows.filter`", exc))
        if base is None:
            try:
                base = self._row_id(context)
            except TemplateError as exc:
                return self._invalid_all(row, None, self._render_problem(row, "`rows.id`", exc))
            if not base.strip():
                what = f"column {self.id_column!r}" if self.id_column else "`rows.id`"
                return self._invalid_all(
                    row,
                    None,
                    site.at_row(
                        row,
                        f"{what} is empty, so this row has no id",
                        "every row needs an id: results, --resume and compare refer to it",
                    ),
                )
            earlier = seen.add(base, row.number)  # type: ignore[union-attr]
            if earlier is not None:
                return self._invalid_all(
                    row,
                    None,
                    site.at_row(
                        row,
                        f"id {base!r} is also the id of row {earlier}",
                        "every row needs its own id: results, --resume and compare refer "
                        "to cases by id; this row does not run until it has one",
                    ),
                )
        out: list[Entry] = []
        for combination in self.combinations:
            cid = case_id(base, combination)
            if self.eval_id is not None and self.eval_id not in (base, cid):
                continue
            out.append(self._case(row, cid, context, combination))
        return out

    def _row_id(self, context: dict[str, Any]) -> str:
        if self.id_column is not None:
            if self.id_column not in context:
                raise TemplateError(f"{self.id_column!r} is undefined", names=(self.id_column,))
            return text_of(context[self.id_column])
        assert self.id_leaf is not None
        got = self.id_leaf.render(context)
        return got if isinstance(got, str) else text_of(got)

    def _case(
        self, row: Row, cid: str, context: dict[str, Any], combination: dict[str, Any]
    ) -> Entry:
        site = self.site
        site.variables = combination
        filled = {**context, **combination} if combination else context
        site.context = filled
        empty = [
            leaf
            for leaf in self._bare
            if filled.get(leaf.bare, 0) in ("", None)  # type: ignore[arg-type]
        ]
        if empty:
            return self._invalid(
                row,
                cid,
                combination,
                [
                    site.at_row(
                        row,
                        f"{site.about(leaf)} is empty",
                        f"`template.{format_key(leaf.path)}` is this value alone: fill it "
                        "in, or leave such rows out with `filter`",
                    )
                    for leaf in empty
                ],
            )
        if self._checking and self._probe is not None and self._free is not None:
            try:
                texts = [leaf.render(filled) for leaf in self._free]
            except TemplateError:
                texts = []  # said by the full build below
            if texts and all(isinstance(t, str) and t.strip() and "@[" not in t for t in texts):
                return self._probe
        try:
            rendered = self.tree.render(filled)
        except RenderError as exc:
            return self._invalid(
                row,
                cid,
                combination,
                [self._render_problem(row, site.about(exc.leaf), exc.error, exc.leaf)],
            )
        if not isinstance(rendered, dict):
            rendered = {}
        case, diags = self.builder.build(
            0,
            {**rendered, "id": cid},
            self.line,
            name_case=False,
            row=RowRef(self.source.label, row.number, row.line),
            variables=combination or None,
        )
        for diag in diags:
            self.problems.add(diag, row)
        if case is None:
            return self._invalid(
                row, cid, combination, [d for d in diags if d.severity == "error"], counted=True
            )
        if not diags and self._probe is None:
            self._probe = case
        return case

    def _render_problem(
        self, row: Row, about: str, error: TemplateError, leaf: Leaf | None = None
    ) -> Diagnostic:
        site = self.site
        missing = error.names[0] if error.names else None
        if missing is not None and missing not in site.context:
            columns = self.source.columns or tuple((row.values or {}).keys())
            return site.at_row(
                row,
                f"no column {missing!r} in this row"
                if self.source.columns is None
                else f"{missing!r} is neither a column nor a variable",
                f"its columns: {', '.join(columns)}; a column a row may lack is read "
                f"with a default: {{{{ {missing} | default('') }}}}",
            )
        where = f" (in `template.{format_key(leaf.path)}`)" if leaf is not None else ""
        return site.at_row(row, f"{about}{where}: {error.message}", error.hint)

    def _invalid_all(self, row: Row, base: str | None, diag: Diagnostic) -> list[Entry]:
        """An invalid case for each combination of a row that cannot be used."""
        out: list[Entry] = []
        for index, combination in enumerate(self.combinations):
            cid = case_id(base, combination) if base is not None else None
            if self.eval_id is not None and self.eval_id not in (base, cid):
                continue
            out.append(self._invalid(row, cid, combination, [diag], counted=index > 0))
        return out

    def _invalid(
        self,
        row: Row,
        cid: str | None,
        combination: dict[str, Any],
        diags: list[Diagnostic],
        *,
        counted: bool = False,
    ) -> InvalidCase:
        if not counted:
            for diag in diags:
                self.problems.add(diag, row)
        self.problems.rows_with_errors += 1
        located = tuple(
            replace(d, message=f"{_where(d)}: {d.message}") if d.file != self.eval_file else d
            for d in diags
        )
        return InvalidCase(
            eval_file=self.eval_file,
            dataset=self.dataset,
            index=row.number - 1,
            id=cid,
            line=self.line,
            diagnostics=located,
            target=self.target,
            repeat=self.repeat,
            row=RowRef(self.source.label, row.number, row.line),
            vars=combination or None,
        )


#: where any text is a valid value: free text, not a name, a path, a pattern or a choice
_FREE_KEYS = frozenset({"outcome", "conversation_id", "note", "description"})
_TEXT_EVALUATORS = frozenset({"contains", "icontains", "equals"})


def _free(template: Any, path: PathKey) -> bool:
    """Whether the string at ``path`` of ``template`` fills free text: any text but a
    blank one (or one holding a role marker, which is warned about) makes a case that is
    fine exactly when the same case with other text there is."""

    def at(*keys: Any) -> Any:
        node = template
        for key in keys:
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError):
                return None
        return node

    if len(path) == 1:
        return path[0] in _FREE_KEYS
    head = path[0]
    if head in ("input_messages", "expected_messages") and len(path) >= 3:
        if len(path) == 3 and path[2] == "content":
            return True  # content as one string
        if len(path) == 5 and path[2] == "content" and path[4] == "value":
            return at(*path[:4], "type") == "text"
        return False
    if head == "turns" and len(path) == 3:
        return path[2] in ("content", "outcome")
    evaluators = path[:2] == ("execution", "evaluators")
    if (head == "evaluators" and len(path) == 3) or (evaluators and len(path) == 4):
        return path[-1] == "value" and at(*path[:-1], "type") in _TEXT_EVALUATORS
    return False


def _where(diag: Diagnostic) -> str:
    """``data.csv:17`` (or ``data.parquet, row 17``): where a row's problem is."""
    name = Path(diag.file).name if diag.file is not None else "<data>"
    if diag.line is not None:
        return f"{name}:{diag.line}"
    return f"{name}, {diag.location}"


class CaseStream:
    """The entries a file's rows make, built as they are first asked for.

    With ``shared``, every reader (``entries()``) gets the same entries, built once: kept
    in memory up to ``keep_limit``, then in a spool on disk. Without, each reader builds
    them again from the rows (a file checked, not run: nothing is kept).
    """

    def __init__(
        self, make: Callable[[], Iterator[Entry]], *, shared: bool, keep_limit: int | None
    ) -> None:
        self._make = make
        self.shared = shared
        self.keep_limit = keep_limit
        self._made: list[Entry] = []
        self._spool: CaseSpool | None = None
        self._producer: Iterator[Entry] | None = None
        self.finished = False
        self.count = 0  # entries built so far (by the shared producer)

    def entries(self) -> Iterator[Entry]:
        """Every entry, in order."""
        if not self.shared:
            yield from self._make()
            return
        i = 0
        reader: SpoolReader | None = None
        while True:
            spool = self._spool
            if spool is None:
                if i < len(self._made):
                    yield self._made[i]
                    i += 1
                    continue
            else:
                if reader is None:
                    reader = spool.reader()
                    for _ in range(i):  # read so far from memory, now on disk
                        reader.next()
                found = reader.next()
                if found is not None:
                    yield found[0]
                    i += 1
                    continue
            if not self._advance():
                return

    def _advance(self) -> bool:
        """Build the next entry; False at the end."""
        if self.finished:
            return False
        if self._producer is None:
            self._producer = self._make()
        entry = next(self._producer, None)
        if entry is None:
            self.finished = True
            return False
        self.count += 1
        if self._spool is None and self.keep_limit is not None and self.count > self.keep_limit:
            spool = self._spool = CaseSpool()
            for kept in self._made:
                _spool_add(spool, kept)
            self._made = []
        if self._spool is not None:
            _spool_add(self._spool, entry)
        else:
            self._made.append(entry)
        return True

    def close(self) -> None:
        """Remove the spool's file, if any."""
        if self._spool is not None:
            self._spool.close()


def _spool_add(spool: CaseSpool, entry: Entry) -> None:
    if isinstance(entry, InvalidCase):
        spool.add_invalid(entry)
    else:
        spool.add(entry)


_ROWS_KEYS = tuple(sc.RawRows.model_fields)
#: template keys that decide what a run plans (its targets, its runs): never per row
_PLANNED = (("execution", "target"), ("repeat",), ("user", "target"))


def plan_rows(
    *,
    data: dict[str, Any],
    eval_path: Path,
    template_src: YamlSource,
    builder: CaseBuilder,
    ctx: LoadContext,
    file_vars: Vars,
    eval_id: str | None,
) -> tuple[RowPlan | None, list[Diagnostic]]:
    """Check a file's ``rows`` and ``template`` and open its data: the plan that makes the
    rows into cases, or the problems that make it unusable (each located: in the eval
    file, or in the data file at its line).

    Args:
        data: the eval file's top-level mapping.
        eval_path: the eval file.
        template_src: the eval file, to locate problems inside ``rows`` and ``template``.
        builder: the file's case builder (its folders, dataset and file-level defaults).
        ctx: the run's loading context (file lookups, ``allow_outside_root``).
        file_vars: the file's variables.
        eval_id: only the cases with this id (or whose row has it).
    """
    src = template_src
    diags: list[Diagnostic] = []
    raw_rows, template = data.get("rows"), data.get("template")
    if raw_rows is None:
        return None, [
            src.diagnostic(
                ("template",),
                "`template` needs `rows`: the data whose rows fill it",
                hint="add `rows: {path: data/cases.csv}` (or remove `template`)",
                at_key=True,
            )
        ]
    if not isinstance(template, dict):
        what = "missing" if template is None else "not a mapping"
        _rows_settings(src, raw_rows, diags)  # its own mistakes, said at the same time
        return None, [
            *diags,
            src.diagnostic(
                ("template",) if "template" in data else ("rows",),
                f"`template` is {what}: the case each row fills",
                hint="add `template:` with `outcome`, `input_messages` and `evaluators`, "
                "using {{ column }} placeholders",
                at_key="template" not in data,
            ),
        ]
    rows = _rows_settings(src, raw_rows, diags)
    if "id" in template:
        diags.append(
            src.diagnostic(
                ("template", "id"),
                "a template has no `id`: each row's case id comes from `rows.id`",
                hint="move it to `rows: {id: ...}` (a column, or a template such as "
                "{{ country | lower }}); without it the id is the row's number",
                at_key=True,
            )
        )
    own_vars: Vars | None = None
    if "vars" in template:
        try:
            own_vars = parse_vars(template["vars"])
        except VarsError as exc:
            at = ("template", "vars", exc.key) if exc.key else ("template", "vars")
            diags.append(src.diagnostic(at, exc.message, hint=exc.hint))
    written = {k: v for k, v in template.items() if k != "vars"}
    tree = compile_tree(written)
    for path, error in tree.errors:
        diags.append(src.diagnostic(("template", *path), error.message, hint=error.hint))
    for planned in _PLANNED:
        if planned in tree.leaves:
            diags.append(
                src.diagnostic(
                    ("template", *planned),
                    f"`{'.'.join(planned)}` cannot change from row to row",
                    hint="write it without placeholders; to run every case on several "
                    "targets, pass --target once for each",
                )
            )
    if rows is None or diags:
        return None, diags
    source = _open(src, rows, eval_path, builder, ctx, diags)
    if source is None:
        return None, diags
    variables = combine(file_vars, own_vars)
    try:
        chosen = combinations(variables)
    except VarsError as exc:
        return None, [src.diagnostic(("vars",), exc.message, hint=exc.hint)]
    var_names = {name for name, _ in variables}
    id_leaf = filter_leaf = None
    id_column = None
    try:
        if rows.id is not None and is_template(rows.id):
            id_leaf = compile_leaf(rows.id, ("rows", "id"), native=False)
        elif rows.id is not None:
            id_column = rows.id
        if rows.filter is not None:
            written_filter = rows.filter if is_template(rows.filter) else f"{{{{ {rows.filter} }}}}"
            filter_leaf = compile_leaf(written_filter, ("rows", "filter"))
    except TemplateError as exc:
        key = "id" if id_leaf is None and rows.filter is None else "filter"
        return None, [src.diagnostic(("rows", key), exc.message, hint=exc.hint)]
    names = set(tree.names)
    for leaf in (id_leaf, filter_leaf):
        if leaf is not None:
            names |= leaf.names
    columns = source.columns
    if columns is not None:
        _check_names(src, source, tree, id_leaf, filter_leaf, id_column, var_names, diags)
        for name in sorted(var_names & set(columns)):
            diags.append(
                src.diagnostic(
                    ("vars", name),
                    f"variable {name!r} is also a column of {source.label}",
                    hint="rename the variable: a template could not tell which is meant",
                    at_key=True,
                )
            )
    if diags:
        return None, diags
    needed = None
    if ROW_NAME not in names:
        needed = frozenset(names | ({id_column} if id_column else set()))
    execution = written.get("execution")
    user = written.get("user")
    repeat = written.get("repeat")
    site = RowSite(eval_path, src, source, tree)
    row_builder = CaseBuilder(
        src=site,
        ctx=ctx,
        roots=builder.roots,
        repo_root=builder.repo_root,
        patterns=builder.patterns,
        dataset=builder.dataset,
        default_evaluator=builder.default_evaluator,
        user_target=builder.user_target,
    )
    row_builder.adopt_file_defaults(builder)
    user_target = None
    if isinstance(user, dict):
        user_target = text_or_none(user.get("target")) or builder.user_target
    plan = RowPlan(
        source=source,
        tree=tree,
        site=site,
        builder=row_builder,
        combinations=chosen,
        dataset=builder.dataset,
        eval_file=eval_path,
        line=src.locate(("template",))[0],
        id_leaf=id_leaf,
        id_column=id_column,
        filter_leaf=filter_leaf,
        limit=rows.limit,
        sample=(rows.sample.n, rows.sample.seed) if rows.sample is not None else None,
        eval_id=eval_id,
        target=text_or_none(execution.get("target")) if isinstance(execution, dict) else None,
        repeat=repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None,
        user_target=user_target,
        needed=needed,
    )
    return plan, []


def _rows_settings(src: YamlSource, raw: Any, diags: list[Diagnostic]) -> sc.RawRows | None:
    """``rows:`` as written, checked: its keys, their values, one source."""
    if isinstance(raw, str):
        raw = {"path": raw}  # `rows: data/cases.csv`
    if not isinstance(raw, dict):
        diags.append(
            src.diagnostic(
                ("rows",),
                "`rows` must be a mapping",
                hint="write `rows: {path: data/cases.csv}` (or `rows: {hf: owner/name, split: test}`)",
            )
        )
        return None
    unknown = [k for k in raw if k not in _ROWS_KEYS]
    for key in unknown:
        diags.append(unknown_key(src, ("rows", key), str(key), _ROWS_KEYS))
    if unknown:
        return None
    wrapped = {"rows": raw}
    try:
        rows = sc.RawFileRows.model_validate(wrapped).rows
    except ValidationError as exc:
        diags.extend(translate(src, exc, wrapped, ()))
        return None
    if (rows.path is None) == (rows.hf is None):
        diags.append(
            src.diagnostic(
                ("rows",),
                "`rows` needs `path` (a data file) or `hf` (a Hugging Face dataset)"
                if rows.path is None
                else "`rows` has both `path` and `hf`: one source only",
                hint="`path: data/cases.csv` (.csv, .tsv, .jsonl, .json, .parquet), or "
                "`hf: owner/name` with `split:`",
            )
        )
        return None
    for key in ("config", "split", "revision"):
        if rows.hf is None and getattr(rows, key) is not None:
            diags.append(
                src.diagnostic(
                    ("rows", key),
                    f"`{key}` goes with `hf` (a Hugging Face dataset), not with `path`",
                    at_key=True,
                )
            )
    if rows.hf is not None and rows.format is not None:
        diags.append(src.diagnostic(("rows", "format"), "`format` goes with `path`", at_key=True))
    return None if diags else rows


def _open(
    src: YamlSource,
    rows: sc.RawRows,
    eval_path: Path,
    builder: CaseBuilder,
    ctx: LoadContext,
    diags: list[Diagnostic],
) -> DataSource | None:
    """The data source of ``rows``, found as attached files are and opened."""
    roots = search_roots(eval_path.parent, builder.repo_root, ctx.cwd)
    path = None
    if rows.path is not None:
        found = ctx.store.resolve(rows.path, roots)
        if found.resolved is None:
            tried = "\n".join(f"      {p}" for p in found.tried)
            diags.append(
                src.diagnostic(
                    ("rows", "path"),
                    f"data file not found: {rows.path}",
                    hint=f"create the file or fix the path; looked in:\n{tried}",
                )
            )
            return None
        path = found.resolved
    elif rows.hf is not None:
        local = ctx.store.resolve(rows.hf, roots).resolved
        path = local if local is not None and local.is_dir() else None
    if path is not None and not (ctx.allow_outside_root or is_within(path, builder.repo_root)):
        diags.append(
            src.diagnostic(
                ("rows", "path" if rows.path is not None else "hf"),
                f"the data {rows.path or rows.hf} resolves outside the repository root ({path})",
                hint=f"keep data inside {builder.repo_root}, or pass --allow-outside-root "
                "if you trust this eval file",
            )
        )
        return None
    label = str(path) if rows.path is not None else f"hf:{rows.hf}"
    if rows.hf is not None:
        label += "".join(f"/{part}" for part in (rows.config, rows.split) if part)
    try:
        return open_source(
            path=path,
            label=label,
            fmt=rows.format,
            hf=rows.hf,
            config=rows.config,
            split=rows.split,
            revision=rows.revision,
        )
    except DataError as exc:
        if exc.line is not None and path is not None:
            diags.append(Diagnostic(path, exc.message, line=exc.line, hint=exc.hint))
        else:
            key = ("rows", "path" if rows.path is not None else "hf")
            diags.append(src.diagnostic(key, exc.message, hint=exc.hint))
        return None


def _check_names(
    src: YamlSource,
    source: DataSource,
    tree: Tree,
    id_leaf: Leaf | None,
    filter_leaf: Leaf | None,
    id_column: str | None,
    var_names: set[str],
    diags: list[Diagnostic],
) -> None:
    """Every name a template reads unguarded is a column or a variable: said once for the
    file, at the first string that reads it, when the data names its columns."""
    columns = source.columns or ()
    known = set(columns) | var_names | GLOBALS
    said: set[str] = set()
    leaves: list[tuple[PathKey, Leaf]] = [
        (("template", *p), leaf) for p, leaf in tree.leaves.items()
    ]
    if id_leaf is not None:
        leaves.append((("rows", "id"), id_leaf))
    if filter_leaf is not None:
        leaves.append((("rows", "filter"), filter_leaf))
    for key, leaf in leaves:
        for name in sorted(leaf.required - known - said):
            said.add(name)
            diags.append(_not_a_column(src, key, name, source))
    if id_column is not None and id_column not in columns:
        diags.append(_not_a_column(src, ("rows", "id"), id_column, source))


def _not_a_column(src: YamlSource, key: PathKey, name: str, source: DataSource) -> Diagnostic:
    columns = source.columns or ()
    close = difflib.get_close_matches(name, list(columns), n=1)
    hint = (f"did you mean {close[0]!r}? " if close else "") + (
        f"its columns: {', '.join(columns)}; variables are defined under `vars:`"
    )
    return src.diagnostic(key, f"{name!r} is not a column of {Path(source.label).name}", hint=hint)
