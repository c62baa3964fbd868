"""S8 reference: what each request of a recorded conversation costs alone.

It sends recorded chat-completions bodies to an OpenAI-compatible server one after the
other, through the official ``openai`` SDK's low-level call (as agentv sends them), and
prints the milliseconds each round trip took as a JSON list. ``s8_live.py`` compares a
200-turn conversation's time per turn with these: the difference is agentv's own work per
turn, which must not grow with the turn number.

Usage::

    python benchmarks/replay_client.py --url http://127.0.0.1:PORT/v1 --bodies bodies.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any


async def replay(url: str, bodies: list[dict[str, Any]]) -> list[float]:
    """Each body's round trip in milliseconds, sent one at a time (one warm-up first)."""
    import openai

    # on aiohttp, as agentv sends (httpx's own transport costs about twice the CPU)
    client = openai.AsyncOpenAI(
        base_url=url, api_key="dummy", max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    times = []
    async with client:
        await client.post("/chat/completions", body=bodies[0], cast_to=bytes)  # warm-up
        for body in bodies:
            started = time.perf_counter()
            await client.post("/chat/completions", body=body, cast_to=bytes)
            times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--bodies", type=Path, required=True, help="a JSON list of request bodies")
    args = p.parse_args(argv)
    bodies = json.loads(args.bodies.read_text(encoding="utf-8"))
    json.dump([round(t, 3) for t in asyncio.run(replay(args.url, bodies))], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
