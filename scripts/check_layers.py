#!/usr/bin/env python3
"""Checks that dependencies among src/ modules point one way (ARCHITECTURE.md).

Every `crate::X` path in a source file is an edge from the file's top-level module to X.
The top-level modules have a rank (bottom to top, as listed in src/lib.rs and
ARCHITECTURE.md); an edge must go to a module of lower or equal rank, and edges between
distinct modules must not form a cycle. Inside one module folder, files refer to each other
freely through `super::` (a parent `mod.rs` declares its children; children implement its
types), which is not checked here.

Exit status 1, with the offending file and path, on any violation.
"""
import pathlib
import re
import sys

# Bottom to top. Modules on the same line are peers (they must not depend on each other).
LAYERS = [
    ["clock", "environment"],
    ["cpu"],
    ["ticks"],
    ["semconv"],
    ["policy"],
    ["call"],
    ["infer"],
    ["breaker"],
    ["stats"],
    ["control"],
    ["hook"],
    ["registry"],
    ["router", "call_helper"],
    ["layer", "span_processor"],
    ["mcp", "fleet"],
    ["metrics"],
    ["web"],
    ["otlp", "status"],
    ["receiver"],
]
RANK = {m: i for i, ms in enumerate(LAYERS) for m in ms}

src = pathlib.Path(__file__).resolve().parent.parent / "src"
errors = []
edges = set()
for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src)
    if rel.name == "lib.rs" and len(rel.parts) == 1:
        continue
    module = rel.parts[0].removesuffix(".rs")
    if module not in RANK:
        errors.append(f"{rel}: module `{module}` has no layer in scripts/check_layers.py")
        continue
    text = path.read_text()
    # Doc comments may link upwards (`[`x`](crate::X)`): only code counts.
    code = "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("//")
    )
    for target in set(re.findall(r"\bcrate::([a-z_]+)", code)):
        if target == module:
            continue
        if target not in RANK:
            # A root re-export (crate::Foo) is not a module path.
            continue
        edges.add((module, target))
        if RANK[target] > RANK[module] or (
            RANK[target] == RANK[module] and target != module
        ):
            errors.append(
                f"{rel}: `{module}` (layer {RANK[module]}) uses `crate::{target}` "
                f"(layer {RANK[target]}): dependencies must point down"
            )

# Cycles among modules (redundant with the ranks, kept as a direct statement of the rule).
graph = {}
for a, b in edges:
    graph.setdefault(a, set()).add(b)
seen, stack = set(), []


def visit(n):
    if n in stack:
        errors.append("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
        return
    if n in seen:
        return
    seen.add(n)
    stack.append(n)
    for m in sorted(graph.get(n, ())):
        visit(m)
    stack.pop()


for n in sorted(graph):
    visit(n)

if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"layers ok: {len(edges)} dependencies between {len(graph)} modules, all pointing down")
