#!/usr/bin/env python3
"""Checks that dependencies among src/ modules point one way (ARCHITECTURE.md), and among
gateway/src/ modules too (the gateway's lib.rs lists them).

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
    ["breaker"],
    ["stats"],
    ["control"],
    ["hook"],
    ["registry"],
    ["router", "call_helper"],
    ["infer"],
    ["layer", "span_processor", "span_feed"],
    ["mcp", "fleet"],
    ["metrics"],
    ["web"],
    ["otlp", "status"],
    ["receiver"],
]
# The gateway's modules, bottom to top (gateway/src/lib.rs).
GATEWAY_LAYERS = [
    ["cli", "names", "healthcheck", "signals", "progress", "served"],
    ["config"],
    ["notify", "token", "reloads"],
    ["probes", "relay"],
    ["upstream"],
    ["telemetry"],
    ["gateway"],
    ["server", "reload"],
    ["http"],
]

root = pathlib.Path(__file__).resolve().parent.parent
errors = []


def check(src, layers, roots):
    """Every `crate::X` of a file under `src` points to a module of lower or equal rank."""
    rank = {m: i for i, ms in enumerate(layers) for m in ms}
    edges = set()
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if len(rel.parts) == 1 and rel.name in roots:
            continue
        module = rel.parts[0].removesuffix(".rs")
        if module not in rank:
            errors.append(f"{path.relative_to(root)}: module `{module}` has no layer in scripts/check_layers.py")
            continue
        text = path.read_text()
        # Doc comments may link upwards (`[`x`](crate::X)`): only code counts.
        code = "\n".join(
            line for line in text.splitlines() if not line.lstrip().startswith("//")
        )
        for target in set(re.findall(r"\bcrate::([a-z_]+)", code)):
            if target == module:
                continue
            if target not in rank:
                # A root re-export (crate::Foo) is not a module path.
                continue
            edges.add((module, target))
            if rank[target] > rank[module] or (
                rank[target] == rank[module] and target != module
            ):
                errors.append(
                    f"{path.relative_to(root)}: `{module}` (layer {rank[module]}) uses `crate::{target}` "
                    f"(layer {rank[target]}): dependencies must point down"
                )
    # Cycles among modules (redundant with the ranks, kept as a direct statement of the rule).
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    seen, stack = set(), []

    def visit(n):
        if n in stack:
            errors.append(
                f"import cycle in {src.relative_to(root)}: "
                + " -> ".join(stack[stack.index(n):] + [n])
            )
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
    return edges, graph


edges, graph = check(root / "src", LAYERS, {"lib.rs"})
gw_edges, gw_graph = check(root / "gateway" / "src", GATEWAY_LAYERS, {"lib.rs", "main.rs"})

if errors:
    print("\n".join(errors))
    sys.exit(1)
print(
    f"layers ok: {len(edges)} dependencies between {len(graph)} modules, all pointing down; "
    f"the gateway's {len(gw_edges)} between {len(gw_graph)}"
)
