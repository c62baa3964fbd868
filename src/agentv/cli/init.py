"""``agentv init``: starter config, targets, an example eval and .env example; never
overwrites a file.

The example eval (``evals/example.yaml``) runs on the offline ``mock`` target, graded by the
``mock_judge`` target, so ``agentv init && agentv eval evals/`` works with no key and no
network. ``.gitignore`` gets what a run writes (results, cache, the run store): created when
missing, else only the missing lines are appended.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

#: (template name, where it goes relative to the folder being set up)
FILES: tuple[tuple[str, str], ...] = (
    ("config.yaml", ".agentv/config.yaml"),
    ("targets.yaml", ".agentv/targets.yaml"),
    ("env.example", ".env.example"),
    ("example.yaml", "evals/example.yaml"),
)

#: ``--csv``: a starter suite whose cases are the rows of a CSV file
CSV_FILES: tuple[tuple[str, str], ...] = (
    ("questions.yaml", "evals/questions.yaml"),
    ("questions.csv", "evals/data/questions.csv"),
)

#: what a run writes and version control should not keep
GITIGNORE_LINES: tuple[str, ...] = (".agentv/results/", ".agentv/cache/", ".agentv/runs.sqlite*")


def init_project(folder: Path, *, csv: bool = False) -> tuple[list[Path], list[Path]]:
    """Write the starter files into ``folder`` (with ``csv``, a suite read from a CSV file
    too); returns (created, skipped because they exist)."""
    created: list[Path] = []
    skipped: list[Path] = []
    templates = resources.files("agentv") / "templates"
    for template, rel in FILES + (CSV_FILES if csv else ()):
        dest = folder / rel
        if dest.exists():
            skipped.append(dest)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text((templates / template).read_text(encoding="utf-8"), encoding="utf-8")
        created.append(dest)
    return created, skipped


def _pattern(line: str) -> str:
    # `.agentv/cache`, `/.agentv/cache/` and `.agentv/cache/` ignore the same folder here
    return line.strip().strip("/")


def update_gitignore(folder: Path, lines: tuple[str, ...] = GITIGNORE_LINES) -> list[str]:
    """Make ``folder/.gitignore`` hold ``lines``: create it, or append the missing ones
    (after a newline when the file does not end with one). Returns the lines added."""
    path = folder / ".gitignore"
    # bytes, so that CRLF line ends are seen (and kept); the file is only appended to
    text = path.read_bytes().decode("utf-8", errors="replace") if path.exists() else ""
    present = {_pattern(line) for line in text.splitlines()}
    missing = [line for line in lines if _pattern(line) not in present]
    if not missing:
        return []
    newline = "\r\n" if "\r\n" in text else "\n"
    addition = "".join(line + newline for line in missing)
    if text and not text.endswith(("\n", "\r")):
        addition = newline + addition
    with path.open("a", encoding="utf-8", newline="") as f:
        f.write(addition)
    return missing


def init_command(
    path: Annotated[Path, typer.Argument(help="Folder to set up (default: here).")] = Path("."),
    csv: Annotated[
        bool,
        typer.Option(
            "--csv",
            help="Also write evals/questions.yaml, a suite whose cases are the rows of "
            "evals/data/questions.csv.",
        ),
    ] = False,
) -> None:
    """Write .agentv/config.yaml, .agentv/targets.yaml, .env.example and evals/example.yaml,
    and ignore .agentv/results/, .agentv/cache/ and the run store in .gitignore (existing
    files are kept)."""
    folder = path.resolve()
    gitignore_existed = (folder / ".gitignore").exists()
    created, skipped = init_project(folder, csv=csv)
    added = update_gitignore(folder)
    for p in created:
        typer.echo(f"Created {p.relative_to(folder)}")
    if added and not gitignore_existed:
        typer.echo(f"Created .gitignore ({', '.join(added)})")
    elif added:
        typer.echo(f"Added {', '.join(added)} to .gitignore")
    for p in skipped:
        typer.echo(f"Kept existing {p.relative_to(folder)} (not overwritten)")
    if created or added:
        suites = "evals/example.yaml and evals/questions.yaml" if csv else "evals/example.yaml"
        typer.echo(
            f"\nTry it now, offline: `agentv eval evals/` runs {suites} on the "
            "`mock` target.\nThen put your keys in .env (see .env.example), pick a target in "
            ".agentv/targets.yaml, and run `agentv eval <your eval file>`."
        )
    else:
        typer.echo("Nothing to do: every file already exists.")
