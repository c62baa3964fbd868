"""``--dump-prompts``: each case's question and chat prompt written to a JSON file."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import orjson

from agentv.cases import EvalCase
from agentv.messages import chat_to_dicts
from agentv.prompts.builder import Prompt
from agentv.system.masking import Masker

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class PromptDumper:
    """Writes ``<timestamp>_<case id>.json`` files into ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.masker = Masker()  # the run's known secrets, masked in what is written

    def dump(self, case: EvalCase, prompt: Prompt, target: str) -> Path:
        """Write one case's prompt; returns the file written."""
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        stamp = stamp.replace(":", "-").replace(".", "-")
        name = _UNSAFE.sub("_", case.id) or "prompt"
        path = self.folder / f"{stamp}_{name}.json"
        if path.exists():  # two attempts within one millisecond
            path = self.folder / f"{stamp}_{name}_{self.count}.json"
        data = {
            "eval_id": case.id,
            "target": target,
            "question": prompt.question,
            "guidelines": prompt.guidelines,
            "guideline_paths": [str(p) for p in prompt.guideline_paths],
            "input_files": [str(p) for p in prompt.input_files],
            "chat_prompt": chat_to_dicts(prompt.messages),
        }
        data = self.masker.value(data)[0]
        path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        self.count += 1
        return path
