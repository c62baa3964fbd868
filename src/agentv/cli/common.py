"""What several commands share: options written once, so they read the same everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

#: ``--allow-outside-root``, for the commands that read eval files
AllowOutsideRoot = Annotated[
    bool,
    typer.Option(
        "--allow-outside-root",
        help="Accept file references that resolve outside the repository root.",
    ),
]
