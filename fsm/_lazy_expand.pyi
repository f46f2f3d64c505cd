"""Type stub for the compiled lazy DFA expansion (fsm/_lazy_expand.c)."""

from typing import Any

def expand_state(
    state: int,
    sets: list[frozenset[int]],
    acc: list[bool],
    index: dict[tuple[frozenset[int], bool], int],
    table: Any,
    edges: list[list[tuple[int, int, int]]],
    class_of_byte: Any,
    num_classes: int,
    eps: list[list[int]],
    has_edges: list[bool],
    pending: dict[int, Any],
    final: int,
    memo: dict[int, tuple[frozenset[int], bool]],
    small_limit: int,
    max_states: int,
) -> int | bool | None: ...
def expand_ahead(
    first: int,
    count: int,
    limit: int,
    sets: list[frozenset[int]],
    acc: list[bool],
    index: dict[tuple[frozenset[int], bool], int],
    table: Any,
    edges: list[list[tuple[int, int, int]]],
    class_of_byte: Any,
    num_classes: int,
    eps: list[list[int]],
    has_edges: list[bool],
    pending: dict[int, Any],
    final: int,
    memo: dict[int, tuple[frozenset[int], bool]],
    small_limit: int,
    max_states: int,
) -> tuple[int, int | bool | None]: ...
