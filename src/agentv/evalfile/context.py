"""What every eval file loaded in one run shares (``LoadContext``): the file cache, the
guideline patterns, and the options that decide how files are read. The loader
(``loader.py``) and each case's builder (``build.py``) take it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentv.errors import Severity
from agentv.evalfile.files import FileStore
from agentv.evalfile.guidelines import GuidelineResolver


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
