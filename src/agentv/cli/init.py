"""``agentv init``: starter config, targets and .env example; never overwrites a file."""

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
)


def init_project(folder: Path) -> tuple[list[Path], list[Path]]:
    """Write the starter files into ``folder``; returns (created, skipped because they exist)."""
    created: list[Path] = []
    skipped: list[Path] = []
    templates = resources.files("agentv") / "templates"
    for template, rel in FILES:
        dest = folder / rel
        if dest.exists():
            skipped.append(dest)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text((templates / template).read_text(encoding="utf-8"), encoding="utf-8")
        created.append(dest)
    return created, skipped


def init_command(
    path: Annotated[Path, typer.Argument(help="Folder to set up (default: here).")] = Path("."),
) -> None:
    """Write .agentv/config.yaml, .agentv/targets.yaml and .env.example (existing files are kept)."""
    folder = path.resolve()
    created, skipped = init_project(folder)
    for p in created:
        typer.echo(f"Created {p.relative_to(folder)}")
    for p in skipped:
        typer.echo(f"Kept existing {p.relative_to(folder)} (not overwritten)")
    if created:
        typer.echo(
            "\nNext: put your keys in .env (see .env.example), pick a target in "
            ".agentv/targets.yaml, then run `agentv eval <your eval file>`."
        )
    else:
        typer.echo("Nothing to do: every file already exists.")
