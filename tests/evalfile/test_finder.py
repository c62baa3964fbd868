"""One set of rules finds eval files for `eval` and `validate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.errors import ConfigError
from agentv.evalfile.finder import expand_eval_paths
from agentv.run.validation import find_yaml_files
from support.files import write

EVAL = "$schema: agentv-eval-v2\nevalcases: []\n"


def test_eval_and_validate_search_folders_alike(tmp_path: Path) -> None:
    write(tmp_path, "evals/a.yaml", EVAL)
    write(tmp_path, "evals/deep/b.YML", EVAL)
    write(tmp_path, "evals/notes.yaml", "just: notes\n")  # YAML, not an eval file
    write(tmp_path, "evals/node_modules/pkg/c.yaml", EVAL)  # dependencies: never searched
    write(tmp_path, "evals/.hidden/d.yaml", EVAL)  # dot-folders: never searched
    write(tmp_path, "evals/.agentv/targets.yaml", "$schema: agentv-targets-v2.2\ntargets: []\n")
    write(tmp_path, "evals/.agentv/results/r.yaml", EVAL)  # agentv's output
    root = tmp_path.resolve()

    found, problems = find_yaml_files([tmp_path / "evals"])
    assert problems == []
    assert sorted(found) == sorted(
        [
            root / "evals/a.yaml",
            root / "evals/deep/b.YML",
            root / "evals/notes.yaml",
            root / "evals/.agentv/targets.yaml",
        ]
    )
    # eval keeps, of the same files, those that declare the eval schema
    assert expand_eval_paths(["evals"], tmp_path) == [
        root / "evals/a.yaml",
        root / "evals/deep/b.YML",
    ]


def test_paths_that_give_no_eval_file_each_say_why(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.yaml").write_text("title: not an eval file\n")
    with pytest.raises(ConfigError) as info:
        expand_eval_paths(["empty", "other", "missing", "evals/**/*.yaml"], tmp_path)
    assert str(info.value) == (
        "no eval files found: the folder empty holds no YAML files; the folder other holds "
        "1 YAML file, none of them an eval file (an eval file starts with "
        "`$schema: agentv-eval-v2`); missing: no such file or folder; evals/**/*.yaml: no "
        "YAML file matches this pattern. Give eval files, folders holding them, or globs (e.g. "
        '"evals/**/*.yaml"); `agentv init` writes an example in evals/.'
    )
