"""Reading the rows of a data file (or a Hugging Face dataset) that an eval file's
``rows:`` names, one at a time (docs/eval-files.md, "Cases from data").

Each source hands out ``Row``s: the row's number among the data rows (1-based), the line
it starts on (text formats), and its values by column, or the problem that makes it
unreadable (a broken CSV quote, a JSON line that does not parse, bytes that are not
UTF-8). A row with a problem never stops the others. What makes the whole source
unusable (no such file, a CSV without a header, a Parquet file that is not one, a JSON
file that is not a list) raises ``DataError``.

Rows are read as they are asked for: a CSV, TSV or JSONL file line by line, a Parquet file
in batches, a Hugging Face dataset from its memory-mapped cache; only a ``.json`` file (one
list) is read whole. ``count()`` tells how many rows there are without reading values
where the format allows (Parquet's metadata, JSONL's lines).
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from agentv.system.extras import install_line
from agentv.system.readfile import open_input
from agentv.yaml.source import describe_decode_error, read_text

#: file name endings and the format each means (``rows.format`` names one explicitly)
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
}
#: rows of a Parquet file read at once (memory stays that of one batch)
PARQUET_BATCH = 1024


class DataError(Exception):
    """A data source that cannot be used at all; ``line`` is where, when known."""

    def __init__(self, message: str, hint: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.line = line


@dataclass(frozen=True, slots=True)
class Row:
    """One data row: its ``values`` by column, or the ``problem`` that makes it unreadable."""

    number: int  # among the data rows, from 1
    line: int | None  # where it starts in its file (None: Parquet, a dataset)
    values: dict[str, Any] | None
    problem: str | None = None
    hint: str | None = None


class DataSource:
    """Where rows come from: a file of one of ``FORMATS``, or a Hugging Face dataset."""

    #: what results and messages call the source (a path, or ``hf:owner/name``)
    label: str
    #: the file, for messages located in it (None: a dataset)
    path: Path | None = None
    #: the columns every row has, when the format says (a header, a schema)
    columns: tuple[str, ...] | None = None

    def rows(self, columns: frozenset[str] | None = None) -> Iterator[Row]:
        """The rows in order; ``columns``: the ones needed (a hint; None: all)."""
        raise NotImplementedError

    def count(self) -> int:
        """How many rows ``rows()`` gives (problems included), read as cheaply as can be."""
        return sum(1 for _ in self.rows(frozenset()))


def open_source(
    *,
    path: Path | None,
    label: str,
    fmt: str | None = None,
    hf: str | None = None,
    config: str | None = None,
    split: str | None = None,
    revision: str | None = None,
) -> DataSource:
    """The source a ``rows:`` mapping names; raises ``DataError`` when it cannot be used.

    Args:
        path: the data file, resolved (for ``hf``: a folder holding a dataset, if local).
        label: how messages and results name it.
        fmt: the format, when not to be told by the file's name.
        hf: a Hugging Face dataset's name (``owner/name``), read through ``datasets``.
        config: the dataset's configuration (subset).
        split: the dataset's split (``train``, ``test``...).
        revision: the dataset's revision (a branch, tag or commit).
    """
    if hf is not None:
        return HfSource(hf, label, path, config, split, revision)
    assert path is not None
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(
            f"cannot tell the format of {path.name} from its name",
            hint=f"name it .csv, .tsv, .jsonl, .json or .parquet, or say `format:` "
            f"(one of {', '.join(sorted(set(FORMATS.values())))})",
        )
    if fmt in ("csv", "tsv"):
        return CsvSource(path, label, "\t" if fmt == "tsv" else ",")
    if fmt == "jsonl":
        return JsonlSource(path, label)
    if fmt == "json":
        return JsonSource(path, label)
    return ParquetSource(path, label)


def _open(path: Path) -> BinaryIO:
    try:
        return open_input(path)
    except FileNotFoundError:
        raise DataError(
            f"data file not found: {path}", hint="create it or fix `rows.path`"
        ) from None
    except OSError as exc:
        raise DataError(
            f"cannot read the data file {path}: {exc.strerror or exc}",
            hint="check the file's permissions",
        ) from None


class _Lines:
    """A binary file's lines as text, each decoded as UTF-8 on its own (a byte-order mark
    at the start dropped), so that a bad byte spoils one row, not the file. ``bad`` holds
    the lines that were not UTF-8 and what was wrong."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.number = 0
        self.bad: dict[int, str] = {}

    def __iter__(self) -> Iterator[str]:
        for raw in self.fh:
            self.number += 1
            if self.number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.bad[self.number] = describe_decode_error(exc, with_line=False)
                yield raw.decode("utf-8", errors="replace")


class CsvSource(DataSource):
    """A CSV (or, with a tab as ``delimiter``, TSV) file whose first row names the columns.

    Values are text as written (an empty cell is ``""``); quoted values may hold the
    delimiter, quotes (doubled) and line breaks (CRLF read as LF, as in attached files).
    Blank lines are not rows.
    """

    def __init__(self, path: Path, label: str, delimiter: str) -> None:
        self.path = path
        self.label = label
        self.delimiter = delimiter
        self.kind = "TSV" if delimiter == "\t" else "CSV"
        with _open(path) as fh:
            lines = _Lines(fh)
            reader = csv.reader(lines, delimiter=delimiter, strict=True)
            try:
                header = next((r for r in reader if r), None)
            except csv.Error as exc:
                raise DataError(
                    f"the header row cannot be read: {exc}", hint=self._quote_hint(), line=1
                ) from None
            if lines.bad:
                line, what = next(iter(lines.bad.items()))
                raise DataError(f"{what}", hint="save the file as UTF-8", line=line)
        if header is None:
            raise DataError(
                f"the {self.kind} file is empty",
                hint=f"a {self.kind} file starts with a header row naming its columns",
                line=1,
            )
        self.header_line = reader.line_num
        seen: set[str] = set()
        for i, name in enumerate(header):
            if not name.strip():
                raise DataError(
                    f"column {i + 1} of the header has no name",
                    hint="name every column in the first row (a delimiter at the end of "
                    "the header makes an empty column)",
                    line=self.header_line,
                )
            if name in seen:
                raise DataError(
                    f"the header names column {name!r} twice",
                    hint="give every column its own name",
                    line=self.header_line,
                )
            seen.add(name)
        self.columns = tuple(header)

    def _quote_hint(self) -> str:
        sep = "a tab" if self.delimiter == "\t" else "a comma"
        return (
            f"a value holding {sep}, a quote or a line break is written in double quotes, "
            'its quotes doubled: "say ""hi"", then go"'
        )

    def rows(self, columns: frozenset[str] | None = None) -> Iterator[Row]:
        columns_ = self.columns or ()
        width = len(columns_)
        with _open(self.path) as fh:  # type: ignore[arg-type]
            lines = _Lines(fh)
            reader = csv.reader(lines, delimiter=self.delimiter, strict=True)
            number = 0
            header_seen = False
            while True:
                start = reader.line_num + 1
                try:
                    record = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    number += 1
                    if "unexpected end of data" in str(exc):
                        message = f"a quote opened in this row is never closed: {exc}"
                    else:
                        message = f"broken quoting: {exc}"
                    yield Row(number, start, None, message, self._quote_hint())
                    continue
                if not record:
                    continue  # a blank line
                if not header_seen:
                    header_seen = True
                    continue
                number += 1
                bad = [lines.bad[n] for n in range(start, reader.line_num + 1) if n in lines.bad]
                if bad:
                    yield Row(number, start, None, bad[0], "save the file as UTF-8")
                elif len(record) != width:
                    yield Row(
                        number,
                        start,
                        None,
                        f"this row has {len(record)} value{'s' if len(record) != 1 else ''}, "
                        f"the header {width} ({', '.join(columns_)})",
                        self._quote_hint(),
                    )
                else:
                    if any("\r" in value for value in record):  # CRLF in a quoted value
                        record = [value.replace("\r\n", "\n") for value in record]
                    yield Row(number, start, dict(zip(columns_, record, strict=True)))

    def count(self) -> int:
        records = 0
        inside = False  # in a quoted value that goes on to the next line
        with _open(self.path) as fh:  # type: ignore[arg-type]
            for raw in fh:
                if not inside and not raw.strip(b"\r\n"):
                    continue  # a blank line
                if raw.count(b'"') % 2:  # doubled quotes inside a value change nothing
                    inside = not inside
                if not inside:
                    records += 1
        if inside:
            records += 1  # a quote never closed: the reading says so, in one row
        return max(0, records - 1)  # the header aside


class JsonlSource(DataSource):
    """JSON Lines: one JSON object per line; blank lines are not rows."""

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        _open(path).close()  # found and readable, said now

    def rows(self, columns: frozenset[str] | None = None) -> Iterator[Row]:
        with _open(self.path) as fh:  # type: ignore[arg-type]
            number = 0
            for line, raw in enumerate(fh, 1):
                if line == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
                if not raw.strip():
                    continue
                number += 1
                try:
                    value = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    yield Row(number, line, None, *_json_problem(raw))
                    continue
                if not isinstance(value, dict):
                    yield Row(
                        number,
                        line,
                        None,
                        f"a row must be a JSON object, not {_json_kind(value)}",
                        'write each row as one object on one line: {"question": "...", ...}',
                    )
                    continue
                yield Row(number, line, value)

    def count(self) -> int:
        with _open(self.path) as fh:  # type: ignore[arg-type]
            return sum(1 for raw in fh if raw.strip())


def _json_problem(raw: bytes) -> tuple[str, str]:
    """Why a JSON line does not parse, in the words of Python's own parser."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return describe_decode_error(exc, with_line=False), "save the file as UTF-8"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return (
            f"not valid JSON: {exc.msg} at character {exc.colno}",
            "each line holds one whole JSON object; a line break inside a string is written \\n",
        )
    except RecursionError:
        return "not valid JSON: nested too deeply", "nest values less deeply"
    return "not valid JSON", "each line holds one whole JSON object"  # pragma: no cover


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return "a number"


class JsonSource(DataSource):
    """A JSON file holding one list of objects (read whole: large data belongs in JSONL
    or Parquet)."""

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        try:
            text = read_text(path, strict=True)
        except FileNotFoundError:
            raise DataError(
                f"data file not found: {path}", hint="create it or fix `rows.path`"
            ) from None
        except UnicodeDecodeError as exc:
            raise DataError(describe_decode_error(exc), hint="save the file as UTF-8") from None
        except OSError as exc:
            raise DataError(f"cannot read the data file {path}: {exc.strerror or exc}") from None
        self._items = list(_json_items(text))

    def rows(self, columns: frozenset[str] | None = None) -> Iterator[Row]:
        for number, (line, value) in enumerate(self._items, 1):
            if isinstance(value, dict):
                yield Row(number, line, value)
            else:
                yield Row(
                    number,
                    line,
                    None,
                    f"a row must be a JSON object, not {_json_kind(value)}",
                    'the file is a list of objects: [{"question": "..."}, ...]',
                )

    def count(self) -> int:
        return len(self._items)


_WS = " \t\r\n"


def _json_items(text: str) -> Iterator[tuple[int, Any]]:
    """(line, value) of each item of the JSON list ``text``; ``DataError`` at the line of
    a syntax error (after it, the list's structure is lost)."""
    decoder = json.JSONDecoder()
    i, line = 0, 1

    def skip(at: int, line: int) -> tuple[int, int]:
        while at < len(text) and text[at] in _WS:
            if text[at] == "\n":
                line += 1
            at += 1
        return at, line

    def fail(at: int, what: str, line: int) -> DataError:
        return DataError(
            f"not valid JSON: {what}",
            hint="a .json data file holds one list of objects: [{...}, {...}]",
            line=line,
        )

    i, line = skip(i, line)
    if i >= len(text) or text[i] != "[":
        raise fail(i, "a .json data file must hold a list", line)
    i, line = skip(i + 1, line)
    if i < len(text) and text[i] == "]":
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise fail(exc.pos, exc.msg, text.count("\n", 0, exc.pos) + 1) from None
        except RecursionError:
            raise fail(i, "nested too deeply", line) from None
        yield line, value
        line += text.count("\n", i, end)
        i, line = skip(end, line)
        if i < len(text) and text[i] == ",":
            i, line = skip(i + 1, line)
            continue
        if i < len(text) and text[i] == "]":
            i, line = skip(i + 1, line)
            if i < len(text):
                raise fail(i, "text after the end of the list", line)
            return
        raise fail(i, "expected ',' or ']' after an item", line)


class ParquetSource(DataSource):
    """A Parquet file, read in batches of ``PARQUET_BATCH`` rows (pyarrow)."""

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        try:
            import pyarrow.parquet as pq
        except ImportError:
            hint = f"install agentv's `parquet` extra: {install_line('parquet')}"
            raise DataError("reading .parquet files needs pyarrow", hint=hint) from None
        _open(path).close()  # found, a regular file, readable
        try:
            self._file = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow's ArrowInvalid and friends
            raise DataError(
                f"not a Parquet file agentv can read: {exc}",
                hint="write it with a Parquet writer (pandas, pyarrow, polars, duckdb)",
            ) from None
        self.columns = tuple(self._file.schema_arrow.names)

    def rows(self, columns: frozenset[str] | None = None) -> Iterator[Row]:
        wanted = None if columns is None else [c for c in self.columns or () if c in columns]
        number = 0
        for batch in self._file.iter_batches(batch_size=PARQUET_BATCH, columns=wanted):
            for values in batch.to_pylist():
                number += 1
                yield Row(number, None, values)

    def count(self) -> int:
        return int(self._file.metadata.num_rows)


class HfSource(DataSource):
    """A Hugging Face dataset through the ``datasets`` library and its local cache: a
    name on the Hub (downloaded once, then read from the cache; with
    ``HF_DATASETS_OFFLINE=1`` from the cache only), or a folder ``save_to_disk`` wrote."""

    def __init__(
        self,
        name: str,
        label: str,
        local: Path | None,
        config: str | None,
        split: str | None,
        revision: str | None,
    ) -> None:
        self.label = label
        try:
            import datasets
        except ImportError:
            raise DataError(
                "reading Hugging Face datasets needs `datasets`",
                hint=f"install agentv's `hf` extra: {install_line('hf')}",
            ) from None
        try:
            if local is not None and (local / "dataset_dict.json").exists():
                found: Any = datasets.load_from_disk(str(local))
            elif local is not None and (local / "dataset_info.json").exists():
                found = datasets.load_from_disk(str(local))
            else:
                found = datasets.load_dataset(
                    str(local) if local is not None else name,
                    config,
                    split=split,
                    revision=revision,
                )
        except Exception as exc:  # the library's many errors: not found, offline, bad config
            raise DataError(
                f"cannot load the dataset {name!r}: {type(exc).__name__}: {exc}",
                hint="check `hf`, `config`, `split` and `revision`; agentv reads datasets "
                "through the local cache of the datasets library, so a dataset not yet "
                "cached needs the network once",
            ) from None
        if isinstance(found, datasets.DatasetDict):
            splits = list(found)
            if split is None and len(splits) == 1:
                split = splits[0]
            if split not in found:
                raise DataError(
                    f"the dataset {name!r} has no split {split!r}"
                    if split is not None
                    else f"the dataset {name!r} has several splits",
                    hint=f"name one with `split:` (it has {', '.join(splits)})",
                )
            found = found[split]
        self._data = found
        self.columns = tuple(found.column_names)

    def rows(self, columns: frozenset[str] | None = None) -> Iterator[Row]:
        data = self._data
        if columns is not None:
            keep = [c for c in self.columns or () if c in columns]
            if len(keep) < len(self.columns or ()):
                data = data.select_columns(keep)
        for number, values in enumerate(data, 1):
            yield Row(number, None, dict(values))

    def count(self) -> int:
        return len(self._data)
