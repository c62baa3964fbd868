"""A record never larger than a results file's reader takes (``MAX_RECORD_BYTES``).

Answers are bounded (``max_output_bytes``, ``max_response_bytes``) and stored once per
record (``large_content``), yet a target allowed to answer more than a record may hold, or
a conversation of many long answers, could still make one. Written as it is, it would be
a line that ``report``, ``--resume`` and ``regrade`` refuse: the run's work lost. Instead
its longest texts are cut, each at the same length, until it fits; each cut text ends
saying how much it lost, and the record's ``shortened`` says where (the run graded the
whole texts: only what is kept of them is cut).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentv.results.reader import MAX_RECORD_BYTES

Path_ = tuple[str | int, ...]
#: texts shorter than this are never cut (a record of many small texts keeps them)
_SMALLEST_CUT = 1024
#: room kept for what cutting adds (the notes, ``shortened``) and a YAML document's marker
_ROOM = 64 * 1024


def _note(left: int) -> str:
    return (
        f"\n[{left:,} characters left out here: the record would have been larger than a "
        f"results file's record may be ({MAX_RECORD_BYTES // 2**20} MiB)]"
    )


def _texts(value: Any, path: Path_, out: list[tuple[Path_, str]]) -> None:
    """Every text of ``value`` longer than ``_SMALLEST_CUT``, with where it is."""
    stack: list[tuple[Any, Path_]] = [(value, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            if len(node) > _SMALLEST_CUT:
                out.append((at, node))
        elif isinstance(node, dict):
            stack.extend((v, (*at, k)) for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((v, (*at, i)) for i, v in enumerate(node))


def _put(value: Any, path: Path_, new: str) -> Any:
    """``value`` with the text at ``path`` replaced (copies along the path only)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _put(value[head], rest, new)}
    copy = list(value)
    copy[head] = _put(copy[head], rest, new)  # type: ignore[index]
    return copy


def _shown(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _cap(lengths: list[int], remove: int) -> int:
    """The longest a text may stay so that cutting every longer one to it removes at
    least ``remove`` characters."""
    low, high = 0, max(lengths)
    while low < high:  # the largest cap that removes enough
        mid = (low + high + 1) // 2
        if sum(n - mid for n in lengths if n > mid) >= remove:
            low = mid
        else:
            high = mid - 1
    return low


def fitted(
    record: dict[str, Any], dumps: Callable[[dict[str, Any]], bytes], limit: int = MAX_RECORD_BYTES
) -> bytes:
    """``record`` as ``dumps`` writes it, at most ``limit`` bytes: when larger, its longest
    texts cut to fit (see the module's docstring). ``record`` itself is not changed."""
    data = dumps(record)
    if len(data) <= limit:
        return data
    size = len(data)
    found: list[tuple[Path_, str]] = []
    _texts(record, (), found)
    cut: dict[Path_, int] = {}  # path -> characters kept
    current = record
    for _ in range(8):  # each round cuts by what the last one still exceeded
        excess = len(data) - limit + _ROOM
        lengths = [cut.get(path, len(text)) for path, text in found]
        if not lengths or max(lengths) <= _SMALLEST_CUT:
            break
        # a character is at least one byte as written: cutting `excess` of them is enough
        # for plain text, and the next round takes what escapes and wide characters added
        cap = max(_SMALLEST_CUT, _cap(lengths, excess))
        current = record
        for (path, text), kept in zip(found, lengths, strict=True):
            keep = min(kept, cap)
            if keep < len(text):
                cut[path] = keep
                current = _put(current, path, text[:keep] + _note(len(text) - keep))
        shown = [_shown(p) for p, _ in found if p in cut]
        current = {**current, "shortened": {"bytes": size, "texts": sorted(shown)}}
        data = dumps(current)
        if len(data) <= limit:
            return data
    # nothing long enough left to cut: the record says what it is, and why it lost the rest
    keep = ("eval_id", "dataset", "status", "passed", "score", "target", "timestamp", "repeat")
    bare = {k: record[k] for k in keep if k in record}
    bare["eval_file"] = record.get("eval_file")
    bare["line"] = record.get("line")
    bare["shortened"] = {"bytes": size, "texts": ["*"]}
    return dumps({k: v for k, v in bare.items() if v is not None})
