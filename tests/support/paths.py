"""Where the repository's folders are, for tests anywhere under ``tests/``."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
DATA = TESTS / "data"
EXAMPLES = ROOT / "examples"
BENCHMARKS = ROOT / "benchmarks"
DOCS = ROOT / "docs"
SUPPORT = TESTS / "support"
