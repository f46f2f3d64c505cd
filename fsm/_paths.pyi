"""Type stub for the compiled path quantities over complete DFA tables (fsm/_paths.c)."""

from typing import Any

def distances_to_accept(table: Any, n: int, num_classes: int, accepting: Any, out: Any) -> None: ...
def reach_max(table: Any, n: int, num_classes: int, dist: Any, out: Any) -> None: ...
def extend_nfa_distances(
    dist: list[int],
    eps: list[list[int]],
    edges: list[list[tuple[int, int, int]]],
    final: int,
    n0: int,
    stubs: list[tuple[int, int, int]],
    no_path: int,
) -> None: ...
