"""The examples of docs/python-frameworks.md run as written.

A block whose first line is ``# example: NAME`` is one example; ``# example: NAME, continued``
runs after it, in the same namespace.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "python-frameworks.md"
BLOCK = re.compile(r"^```python\n(# example: ([a-z_]+)(, continued)?[^\n]*\n.*?)^```", re.M | re.S)


def examples() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for code, name, continued in BLOCK.findall(DOC.read_text()):
        assert (name in found) == bool(continued), f"{name}: a continuation needs its example first"
        found.setdefault(name, []).append(code)
    return found


@contextlib.contextmanager
def no_upload(name: str) -> Iterator[None]:
    """The OpenAI Agents SDK's tracing off for its example (no key here: nowhere to upload),
    and back on after, for the span tests."""
    if name != "openai_agents":
        yield
        return
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    try:
        yield
    finally:
        set_tracing_disabled(False)


def test_every_framework_has_an_example() -> None:
    assert sorted(examples()) == ["langchain", "openai_agents", "pydantic_ai"]


@pytest.mark.parametrize("name", sorted(examples()))
def test_example_runs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    namespace: dict[str, object] = {"__name__": f"doc_example_{name}"}
    with no_upload(name):
        for code in examples()[name]:
            exec(compile(code, f"{DOC.name}:{name}", "exec"), namespace)
