"""In-process figures for speed claims that tests used to make with wall-clock bounds.

Tests check behaviour and keep only generous hang guards; how fast things are is measured
here, on a quiet machine, and read by a person (no pass/fail):

- deterministic evaluators: evaluations per second (``contains``, ``regex``, ``is_json``
  with a schema), through ``run_evaluator`` as grading calls them;
- one provider's concurrent requests: N requests to the loopback fake answering after a
  fixed delay, all started at once; wall time, the most requests the server held at once,
  and efficiency (the delay over the wall time: 1.0 means fully overlapped).

    .venv/bin/python benchmarks/micro.py            # 2,000 evaluations each, 60 requests
    .venv/bin/python benchmarks/micro.py --quick    # a few hundred, 10 requests (seconds)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measure import load_fake_server_module, max_in_flight

from agentv.cases import EvalCase, EvaluatorConfig
from agentv.evaluators.base import EvaluationContext
from agentv.evaluators.deterministic import ContainsSpec, IsJsonSpec, RegexSpec
from agentv.evaluators.grading import run_evaluator
from agentv.messages import Message, TextSegment
from agentv.prompts.builder import build_prompt, request_messages
from agentv.providers.base import ProviderRequest
from agentv.providers.registry import provider_class

ANSWER = '{"city": "Paris", "population": 2100000}'
EVALUATORS = {
    "contains": EvaluatorConfig("c", ContainsSpec(type="contains", value="Paris")),
    "regex": EvaluatorConfig("r", RegexSpec(type="regex", value=r"\d{7}", flags="i")),
    "is_json + schema": EvaluatorConfig(
        "j",
        IsJsonSpec.model_validate(
            {
                "type": "is_json",
                "schema": {"type": "object", "required": ["city"]},
            }
        ),
    ),
}


async def evaluations_per_second(n: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="agentv-micro-"))
    out: dict[str, float] = {}
    for label, config in EVALUATORS.items():
        case = EvalCase(
            id="c",
            dataset="d",
            eval_file=folder / "e.yaml",
            outcome="o",
            input_messages=(Message("user", (TextSegment("q"),)),),
            expected_messages=(),
            reference_answer="",
            evaluators=(config,),
        )
        ctx = EvaluationContext(case, build_prompt(case), ANSWER, "t", None)
        assert (await run_evaluator(ctx, config)).score == 1.0  # warm and check
        started = time.perf_counter()
        for _ in range(n):
            await run_evaluator(ctx, config)
        out[label] = n / (time.perf_counter() - started)
    return out


async def concurrent_requests(n: int, delay_ms: float) -> dict[str, Any]:
    fakes = load_fake_server_module()
    with fakes.FakeLLMServer(delay_ms=delay_ms) as server:
        cls = provider_class("openai")
        settings = cls.Settings.model_validate(
            {"api_key": "dummy", "model": "fake", "base_url": f"{server.url}/v1"}
        )
        provider = cls("bench", settings)
        try:
            request = ProviderRequest(question="q", messages=request_messages("q"))
            await provider.invoke(request)  # connection and imports warmed
            server.reset()
            started = time.perf_counter()
            await asyncio.gather(*(provider.invoke(request) for _ in range(n)))
            wall = time.perf_counter() - started
        finally:
            await provider.aclose()
        held = max_in_flight([r.received_at for r in server.requests], delay_ms / 1000)
    return {
        "requests": n,
        "delay_ms": delay_ms,
        "wall_s": round(wall, 3),
        "most_in_flight": held,
        "efficiency": round(delay_ms / 1000 / wall, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a quick look")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    evaluations = 300 if args.quick else 2000
    requests = 10 if args.quick else 60
    rates = asyncio.run(evaluations_per_second(evaluations))
    concurrency = asyncio.run(concurrent_requests(requests, 200.0))
    if args.json:
        print(json.dumps({"evaluations_per_second": rates, "concurrency": concurrency}))
        return 0
    print(f"deterministic evaluators ({evaluations:,} evaluations each):")
    for label, rate in rates.items():
        print(f"  {label:<18} {rate:>10,.0f} evaluations/s")
    c = concurrency
    print(
        f"openai provider, {c['requests']} requests at once, {c['delay_ms']:.0f} ms each: "
        f"{c['wall_s']:.3f} s wall, {c['most_in_flight']} in flight at most, "
        f"efficiency {c['efficiency']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
