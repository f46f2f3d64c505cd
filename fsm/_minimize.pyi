"""Type stub for the compiled DFA minimization (fsm/_minimize.c)."""

from typing import Any

def minimize(table: Any, n: int, num_classes: int, labels: Any, out: Any) -> int: ...
