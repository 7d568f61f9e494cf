"""The examples (the README's "Python" section and docs/python.md show them) run and check
their own outcome."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("example", ["helper.py", "processor.py", "metrics.py"])
def test_example_runs(example: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
