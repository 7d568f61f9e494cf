"""The Python code blocks of docs/python.md and of the README's "Python" section run as they
are (each block on its own, in a fresh namespace)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def blocks(path: pathlib.Path, section: str | None = None) -> list[str]:
    text = path.read_text()
    if section is not None:
        start = text.index(f"\n## {section}\n")
        end = text.find("\n## ", start + 1)
        text = text[start : end if end != -1 else None]
    return re.findall(r"```python\n(.*?)```", text, re.S)


CASES = [
    *(("docs/python.md", i, b) for i, b in enumerate(blocks(ROOT / "docs" / "python.md"))),
    *(("README.md", i, b) for i, b in enumerate(blocks(ROOT / "README.md", "Python"))),
]


def test_there_are_blocks() -> None:
    assert sum(1 for c in CASES if c[0] == "docs/python.md") >= 6
    assert sum(1 for c in CASES if c[0] == "README.md") >= 2


@pytest.mark.parametrize(("doc", "index", "code"), CASES, ids=[f"{c[0]}#{c[1]}" for c in CASES])
def test_block_runs(doc: str, index: int, code: str) -> None:
    exec(compile(code, f"{doc} block {index}", "exec"), {"__name__": f"guide_{index}"})
