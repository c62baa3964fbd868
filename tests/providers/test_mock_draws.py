"""The mock target's ``responses``: one drawn per request, the same for the same request,
its own draw for each repeat and each judge sample, from an even distribution."""

from __future__ import annotations

from collections import Counter

from agentv.providers.mock import MockProvider, MockSettings
from support.providers import ask


def _mock(**settings: object) -> MockProvider:
    return MockProvider("m", MockSettings.model_validate(settings))


async def test_the_same_request_draws_the_same_answer() -> None:
    mock = _mock(responses=["a", "b", "c"], seed=7)
    first = await mock.invoke(ask("Q?", eval_id="x"))
    again = await mock.invoke(ask("Q?", eval_id="x"))
    assert first.text == again.text
    assert first.text in {"a", "b", "c"}


async def test_repeats_and_samples_draw_apart_and_evenly() -> None:
    mock = _mock(responses=["pass", "fail"], seed=1)
    drawn = Counter()
    for repeat in range(200):
        for sample in range(5):
            response = await mock.invoke(ask("Q?", eval_id="x", repeat=repeat, sample=sample))
            drawn[response.text] += 1
    # 1000 draws of a fair coin: each side well within 4 standard deviations (63) of 500
    assert set(drawn) == {"pass", "fail"}
    assert abs(drawn["pass"] - 500) < 63


async def test_the_seed_changes_the_draws() -> None:
    def draws(seed: int) -> list[str]:
        mock = _mock(responses=[str(i) for i in range(10)], seed=seed)
        return [mock.answer(ask("Q?", eval_id="x", repeat=r)) for r in range(20)]

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)


async def test_without_responses_the_one_response() -> None:
    mock = _mock(response="always")
    assert (await mock.invoke(ask("Q?", repeat=3, sample=2))).text == "always"
