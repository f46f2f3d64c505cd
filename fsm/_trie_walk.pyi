"""Type stub for the compiled trie walk (fsm/_trie_walk.c)."""

from typing import Any

def walk(
    table: Any,
    num_classes: int,
    class_of_byte: Any,
    node_byte: Any,
    node_depth: Any,
    node_skip: Any,
    node_token: Any,
    state: int,
    pos: int,
    stack: Any,
    bits: Any,
    ends: Any | None,
    reached: Any | None = None,
    sub: Any | None = None,
    loop: Any | None = None,
    lflag: Any | None = None,
    vrow: Any | None = None,
) -> int: ...
def subtree_bytes(node_byte: Any, node_skip: Any, out: Any) -> None: ...
def copy_ranges(dst: Any, src: Any, ranges: Any) -> None: ...
def permute_bits(src: Any, index: Any, dst: Any) -> None: ...
def walk_bits(
    table: Any,
    num_classes: int,
    class_of_byte: Any,
    nodes: Any,
    state: int,
    pos: int,
    stack: Any,
    bits: Any,
    vrow: Any | None = None,
    within: Any | None = None,
    loop: Any | None = None,
    lflag: Any | None = None,
) -> int: ...
def pack_nodes(node_byte: Any, node_depth: Any, node_skip: Any, node_token: Any, out: Any) -> None: ...
def subtree_within(node_byte: Any, node_skip: Any, loop: Any, out: Any) -> None: ...
def body_shape(table: Any, num_classes: int, sigma: Any, state: int, out: Any, max_depth: int, missing: Any) -> int: ...
def walk_bytes(table: Any, num_classes: int, class_of_byte: Any, state: int, data: bytes) -> int: ...
def any_live(table: Any, num_classes: int, class_of_byte: Any, state: int, skip: int, flat: Any, offsets: Any, lo: int, hi: int) -> int: ...
