"""S2 and S5 references: a program that does nothing but the scenario's calls.

It sends one recorded request body N times to an OpenAI-compatible server, keeping
``--workers`` calls in flight, and checks every answer. No eval file, no evaluation, no
results: its wall time is what the calls alone cost in one Python process, which bounds
what any runner built the same way can reach. ``run.py`` times it beside agentv.

Modes:

- ``sdk-create``: the official ``openai`` SDK as its users usually call it,
  ``AsyncOpenAI.chat.completions.create`` on the SDK's aiohttp client;
- ``sdk-post``: the SDK's lowest-level call with a wire-ready body (what agentv does);
- ``aiohttp``: plain aiohttp without the SDK (a lower bound for any Python client; agentv
  does not take this road, its providers go through the official SDKs);
- ``agentv-provider``: agentv's own OpenAI provider behind its gate, a quarter more callers
  than turns as a run's lane has (S8 reference): agentv's request path with no eval work;
- ``paced`` (S5): plain aiohttp, one request every ``1 / --rate`` s, each at its time
  whatever the others' answers, none retried: what the server accepts of a perfectly paced
  client on this machine (the server counts the refusals).

Usage::

    python benchmarks/bare_client.py --mode sdk-post --url http://127.0.0.1:PORT/v1 \\
        --body body.json --n 2000 --workers 50 --needle 42
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MODES = ("sdk-create", "sdk-post", "aiohttp", "paced", "agentv-provider")

Call = Callable[[], Awaitable[str]]


async def _drive(call: Call, n: int, workers: int, needle: str) -> int:
    """Make ``n`` calls with ``workers`` in flight; the number of bad answers."""
    remaining = iter(range(n))
    bad = 0

    async def worker() -> None:
        nonlocal bad
        for _ in remaining:
            if needle not in await call():
                bad += 1

    await asyncio.gather(*(worker() for _ in range(workers)))
    return bad


async def _run_sdk(mode: str, url: str, body: dict[str, Any], args: argparse.Namespace) -> int:
    import openai

    client = openai.AsyncOpenAI(
        base_url=url, api_key="dummy", max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    wire = json.dumps(body).encode()

    async def create() -> str:
        completion = await client.chat.completions.create(**body)
        return completion.choices[0].message.content or ""

    async def post() -> str:
        raw = await client.post("/chat/completions", content=wire, cast_to=bytes)
        return json.loads(raw)["choices"][0]["message"]["content"] or ""

    async with client:
        return await _drive(
            create if mode == "sdk-create" else post, args.n, args.workers, args.needle
        )


async def _run_agentv_provider(url: str, body: dict[str, Any], args: argparse.Namespace) -> int:
    from agentv.messages import ChatMessage
    from agentv.providers.base import ProviderRequest
    from agentv.providers.openai import OpenAIProvider, OpenAISettings
    from agentv.run.scheduling import GatedProvider, TargetGate, lane_size

    settings = OpenAISettings(model=body["model"], base_url=url, api_key="dummy")
    provider = GatedProvider(OpenAIProvider("bare", settings), TargetGate(args.workers))
    messages = [ChatMessage(m["role"], m["content"]) for m in body["messages"]]
    request = ProviderRequest(question=messages[-1].content, messages=messages)
    remaining = iter(range(args.n))
    bad = 0

    async def caller() -> None:
        nonlocal bad
        for _ in remaining:
            bad += args.needle not in (await provider.invoke(request)).text

    try:  # as many callers as a run's lane has cases at once for this gate
        await asyncio.gather(*(caller() for _ in range(lane_size(args.workers))))
    finally:
        await provider.aclose()
    return bad


async def _run_aiohttp(url: str, body: dict[str, Any], args: argparse.Namespace) -> int:
    import aiohttp

    wire = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer dummy"}
    endpoint = url.rstrip("/") + "/chat/completions"
    # The SDK's aiohttp client allows far more connections than 50; so does this one.
    connector = aiohttp.TCPConnector(limit=1000)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call() -> str:
            async with session.post(endpoint, data=wire, headers=headers) as response:
                response.raise_for_status()
                return (await response.json())["choices"][0]["message"]["content"] or ""

        return await _drive(call, args.n, args.workers, args.needle)


async def _run_paced(url: str, body: dict[str, Any], args: argparse.Namespace) -> int:
    import aiohttp

    wire = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer dummy"}
    endpoint = url.rstrip("/") + "/chat/completions"
    loop = asyncio.get_running_loop()
    bad = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000)) as session:
        start = loop.time()

        async def one(i: int) -> None:
            nonlocal bad
            await asyncio.sleep(max(0.0, start + i / args.rate - loop.time()))
            async with session.post(endpoint, data=wire, headers=headers) as response:
                if response.status == 200:
                    answer = (await response.json())["choices"][0]["message"]["content"]
                    bad += args.needle not in (answer or "")
                elif response.status != 429:
                    response.raise_for_status()

        await asyncio.gather(*(one(i) for i in range(args.n)))
    return bad


def main(argv: list[str] | None = None) -> int:
    """Run the calls; exit 1 when any answer lacked the needle (an error raises)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--url", required=True, help="base URL ending in /v1")
    p.add_argument("--body", type=Path, required=True, help="JSON request body to send")
    p.add_argument("--n", type=int, required=True, help="number of calls")
    p.add_argument("--workers", type=int, default=50, help="calls in flight")
    p.add_argument("--needle", default="42", help="text every answer must contain")
    p.add_argument("--rate", type=float, default=20.0, help="paced: requests a second")
    args = p.parse_args(argv)
    body = json.loads(args.body.read_text(encoding="utf-8"))
    if args.mode == "aiohttp":
        bad = asyncio.run(_run_aiohttp(args.url, body, args))
    elif args.mode == "paced":
        bad = asyncio.run(_run_paced(args.url, body, args))
    elif args.mode == "agentv-provider":
        bad = asyncio.run(_run_agentv_provider(args.url, body, args))
    else:
        bad = asyncio.run(_run_sdk(args.mode, args.url, body, args))
    if bad:
        print(f"{bad} of {args.n} answers lacked {args.needle!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
