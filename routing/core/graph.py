"""Checks on the graph of virtual models: every target exists, no cycles, nesting no deeper than 8.

Used by the admin, the config loader and the runtime compiler alike, so an operator gets the same answer
wherever a configuration comes from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from routing.core.table import MAX_VIRTUAL_DEPTH


@dataclass(frozen=True, slots=True)
class GraphProblem:
    source: str  # the virtual model whose target list is wrong
    target: str  # the offending target name ("" when the problem is the source itself)
    message: str


def check_virtual_graph(
    edges: Mapping[str, Sequence[str]], concrete: set[str] | frozenset[str]
) -> list[GraphProblem]:
    """Problems in ``edges`` (virtual model -> target names) given the set of concrete model names."""
    problems: list[GraphProblem] = []
    for source, targets in edges.items():
        if not targets:
            problems.append(GraphProblem(source, "", "a virtual model needs at least one target"))
        for target in targets:
            if target not in edges and target not in concrete:
                problems.append(GraphProblem(source, target, f'unknown model "{target}"'))

    # Depth-first search with colours finds cycles; the longest path below each node gives the depth.
    depth: dict[str, int] = {}
    visiting: set[str] = set()
    reported_cycle: set[str] = set()

    def walk(node: str, path: list[str]) -> int:
        if node in depth:
            return depth[node]
        if node in visiting:
            start = path.index(node)
            cycle = path[start:]  # the path already ends with the node that closes the cycle
            owner = cycle[0]
            if owner not in reported_cycle:
                reported_cycle.update(cycle)
                problems.append(GraphProblem(owner, cycle[1], "cycle: " + " -> ".join(cycle)))
            return 0
        visiting.add(node)
        below = 0
        for child in edges.get(node, ()):
            if child in edges:
                below = max(below, walk(child, path + [child]))
        visiting.discard(node)
        depth[node] = below + 1
        return depth[node]

    for source in edges:
        if walk(source, [source]) > MAX_VIRTUAL_DEPTH and source not in reported_cycle:
            problems.append(
                GraphProblem(source, "", f"virtual models nest {depth[source]} deep; at most {MAX_VIRTUAL_DEPTH}")
            )
    return problems
