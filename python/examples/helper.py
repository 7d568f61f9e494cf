"""The call helper: a tool that fails three times is refused, probed once after its cooldown,
and back — in-process, no HTTP. Run: python examples/helper.py"""

from __future__ import annotations

import asyncio

import tool_health
from tool_health import ErrorClass, ManualClock, Refused, Registry

clock = ManualClock()  # tests move time by hand; leave it out for the system clock
registry = Registry(failure_threshold=3, recovery=30.0, probe_timeout=30.0, clock=clock)
upstream_up = False


class BadQuery(ValueError):
    """The model's mistake: never counted against the tool."""


def classify(exc: BaseException) -> ErrorClass:
    if isinstance(exc, BadQuery):
        return ErrorClass.caller_error("invalid_arguments")
    return ErrorClass.failure("upstream_error")


@registry.tool("search", timeout=10, classify=classify)
async def search(query: str) -> str:
    if not query:
        raise BadQuery("empty query")
    if not upstream_up:
        raise ConnectionError("search backend down")
    return f"results for {query}"


async def agent_step(query: str) -> str:
    """What the agent hands the model: the result, or a soft refusal it can plan around."""
    try:
        return await search(query)
    except Refused as refused:
        return str(refused)  # begins with tool_health.REFUSAL_MESSAGE, says when to retry
    except Exception as e:
        return f"error: {e}"


async def main() -> None:
    global upstream_up
    print(await agent_step(""))  # a caller error: ignored
    for _ in range(3):
        print(await agent_step("rust"))  # three failures trip the breaker
    answer = await agent_step("rust")
    assert answer.startswith(tool_health.REFUSAL_MESSAGE), answer
    print(answer)
    clock.advance(30)  # the cooldown ends: the next call is the single probe
    upstream_up = True
    print(await agent_step("rust"))
    snapshot = registry.snapshot("search")
    assert snapshot is not None and snapshot.breaker == "closed"
    print(snapshot)


if __name__ == "__main__":
    asyncio.run(main())
