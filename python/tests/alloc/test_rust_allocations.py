"""The Rust code of the extension allocates nothing on the hot paths after a tool's first sight.

`hot_paths.py` runs a group of hot paths — the calls (the gate and the records by hand, the call
helper sync and async, with and without a timeout or a classifier, the decorators, a refusal) or
the span processor (tool spans succeeding, failing with an exception event and OpenInference's, a
model span, the call helper inside a tool span it claims) — `n` times after a warm-up, under
valgrind's DHAT, which records every heap allocation with its stack.
An allocation made by the extension's own code is one whose allocator (malloc, calloc, realloc)
was called from a frame of `tool_health/_core*.so`; Python's own allocations (the objects the
calls create and return: a `Permit`, a float) are the interpreter's, called from libpython. Two
runs, of 100 and of 300 calls each: the Rust allocations must not grow with the calls.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ALLOCATORS = ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign")
STD = ("alloc::", "core::", "std::", "T as alloc::", "T as core::")


def _short(frame: str) -> str:
    """`0x1234: name (in /path/lib.so)` -> `name`."""
    return frame.split(": ", 1)[-1].split(" (in ", 1)[0][:90]


def rust_allocations(group: str, n: int, tmp: Path) -> collections.Counter[str]:
    """The extension's heap allocations in a run of `n` rounds of a group, by call site."""
    out = tmp / f"dhat.{group}.{n}.json"
    proc = subprocess.run(
        [
            "valgrind", "--tool=dhat", f"--dhat-out-file={out}",
            sys.executable, str(HERE / "hot_paths.py"), group, str(n),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    frames = data["ftbl"]
    sites: collections.Counter[str] = collections.Counter()
    for point in data["pps"]:
        stack = [frames[i] for i in point["fs"]]
        # The first frame that is not the allocator itself is who asked for the memory.
        callers = [f for f in stack if not any(f"{a} (" in f for a in ALLOCATORS)]
        if callers and "/tool_health/_core" in callers[0]:
            # Named by the first frames past the standard library's allocation plumbing.
            own = [_short(f) for f in callers if not _short(f).lstrip("<").startswith(STD)]
            sites[" <- ".join(own[:3])] += point["tbk"]  # blocks
    return sites


def grown_per_round(group: str, tmp: Path) -> dict[str, float]:
    """The allocation sites that grew with the rounds (100 → 300), per round."""
    if shutil.which("valgrind") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("valgrind is missing (apt-get install valgrind)")
        pytest.skip("valgrind is missing")
    few, many = rust_allocations(group, 100, tmp), rust_allocations(group, 300, tmp)
    return {site: (many[site] - few.get(site, 0)) / 200 for site in many if many[site] > few.get(site, 0)}


def explain(grown: dict[str, float]) -> str:
    stripped = any("???" in site for site in grown)
    hint = "\n(symbols stripped: build with `strip = false` in pyproject.toml to name them)" if stripped else ""
    return hint + "\nRust allocations that grow with the calls:\n" + "\n".join(
        f"  {count:g} per round: {site}" for site, count in sorted(grown.items(), key=lambda kv: -kv[1])
    )


def test_the_gate_the_records_and_the_call_helper_allocate_nothing_in_rust(tmp_path: Path) -> None:
    grown = grown_per_round("calls", tmp_path)
    assert not grown, explain(grown)


def test_the_span_processor_allocates_nothing_in_rust(tmp_path: Path) -> None:
    grown = grown_per_round("spans", tmp_path)
    assert not grown, explain(grown)
