"""The Inspect AI side of the peer benchmark (run by ``benchmarks/peers.py``).

    inspect eval inspect_task.py -T data=cases.jsonl [-T mock=true] --model ...

Each line of ``cases.jsonl`` holds ``id``, ``input`` (a 4-message conversation: system, user,
assistant, user) and ``target`` (the text the answer must contain). The solver is a single
``generate()``; the scorer is ``includes()``, Inspect's substring check, the counterpart of
agentv's ``contains`` evaluator.

This file runs in the peer's own virtual environment, not agentv's.
"""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample, json_dataset
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

MOCK_ANSWER = "Default output from mockllm/model"

_MESSAGE_TYPES = {
    "system": ChatMessageSystem,
    "user": ChatMessageUser,
    "assistant": ChatMessageAssistant,
}


def _sample(record: dict) -> Sample:
    messages = [_MESSAGE_TYPES[m["role"]](content=m["content"]) for m in record["input"]]
    return Sample(id=record["id"], input=messages, target=record["target"])


def _instant_output(_input, _tools, _tool_choice, _config) -> ModelOutput:
    # mockllm's default answer, with usage filled in: without it mockllm counts tokens with
    # tiktoken, which downloads its encoding from the internet (and fails offline).
    output = ModelOutput.from_content(model="mockllm", content=MOCK_ANSWER)
    output.usage = ModelUsage(input_tokens=50, output_tokens=6, total_tokens=56)
    return output


@task
def perf(data: str = "cases.jsonl", mock: bool = False) -> Task:
    """``mock=true`` answers instantly and offline through ``mockllm/model``."""
    model = get_model("mockllm/model", custom_outputs=_instant_output) if mock else None
    return Task(
        dataset=json_dataset(data, _sample),
        solver=generate(),
        scorer=includes(),
        model=model,
    )
