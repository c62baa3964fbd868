"""Without the ``view`` extra, ``agentv view`` says how to install it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentv.api import workbench
from agentv.errors import SetupError


def test_the_missing_extra_is_named_with_its_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith(("agentv.view", "starlette"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "starlette", None)  # as if it were not installed
    with pytest.raises(SetupError) as raised:
        workbench(store=tmp_path / "s.sqlite", cwd=tmp_path)
    assert str(raised.value) == (
        "agentv view needs the view extra (starlette is missing): "
        "pip install 'starlette>=0.40' 'uvicorn>=0.30' 'markupsafe>=2.1'"
    )
    assert not (tmp_path / "s.sqlite").exists()
