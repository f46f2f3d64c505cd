"""``SchemaOptions`` (how a JSON Schema is turned into a grammar: layout, strictness, nesting and
recursion bounds) and ``ConversionReport`` (what a conversion did not enforce, and which
subschema built each product of the IR)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .ir import Node, new_products


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema is turned into a grammar.

    ``whitespace``: ``"canonical"`` | ``"compact"`` | ``"flexible"``; ``max_ws``: bound per
    position for flexible; ``strict``: raise on unenforceable keywords (else drop them and
    post-validate); ``max_recursion_depth``: unrolling of recursive ``$ref``;
    ``any_value_depth``: nesting bound for unconstrained values; ``any_value_fallback_depth``:
    the bound a compile tries again with when the automaton at ``any_value_depth`` passes the
    compiler's state cap (None, or one not below ``any_value_depth``: no second try);
    ``product_value_depth``: nesting bound for the unconstrained values in the operands of an
    eager product (built whole, its states multiply with each level; the items and members
    around a failing or matching one nest 2 more); ``allow_undeclared_properties``: JSON Schema's default ``additionalProperties: true``
    when the keyword is absent (off by default: a narrowing most users want); ``infer_types``:
    a schema without ``type`` takes the types its keywords belong to (``minLength`` → strings,
    ``properties`` → objects, …; on by default: a narrowing most users want), where JSON Schema
    lets every other type through unconstrained (off: every type, as JSON Schema reads it).
    """

    whitespace: str = "canonical"
    max_ws: int = 2
    strict: bool = True
    max_recursion_depth: int = 3
    any_value_depth: int = 6
    any_value_fallback_depth: int | None = 3
    product_value_depth: int = 3
    allow_undeclared_properties: bool = False
    infer_types: bool = True

    def __post_init__(self) -> None:
        if self.whitespace not in ("canonical", "compact", "flexible"):
            raise ValueError(f"whitespace must be 'canonical', 'compact' or 'flexible', not {self.whitespace!r}")
        if not 0 <= self.max_ws <= 64:
            raise ValueError(f"max_ws must be in [0, 64], got {self.max_ws}")
        for name in ("max_recursion_depth", "any_value_depth", "product_value_depth"):
            depth = getattr(self, name)
            if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
                raise ValueError(f"{name} must be an int >= 0, got {depth!r}")
        for name in ("strict", "allow_undeclared_properties", "infer_types"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        fallback = self.any_value_fallback_depth
        if fallback is not None and (isinstance(fallback, bool) or not isinstance(fallback, int) or fallback < 0):
            raise ValueError(f"any_value_fallback_depth must be None or an int >= 0, got {fallback!r}")

    def shallower(self) -> SchemaOptions | None:
        """These options with ``any_value_depth`` lowered to ``any_value_fallback_depth`` (and no
        further fallback), or None when there is no lower one."""
        if self.any_value_fallback_depth is None or self.any_value_fallback_depth >= self.any_value_depth:
            return None
        return dataclasses.replace(self, any_value_depth=self.any_value_fallback_depth, any_value_fallback_depth=None)

    def dumps(self, value: Any) -> str:
        """``value`` serialized in this layout (what generation produces)."""
        seps = (", ", ": ") if self.whitespace == "canonical" else (",", ":")
        return json.dumps(value, ensure_ascii=False, separators=seps, allow_nan=False)


@dataclass
class ConversionReport:
    """What the conversion did not enforce: ``dropped`` (keyword, pointer) pairs (``strict=False``
    only) and ``ignored_formats`` (format, pointer): formats JSON Schema does not define, which
    are annotations that no validator checks (e.g. OpenAPI's ``int32``)."""

    dropped: list[tuple[str, str]] = field(default_factory=list)
    ignored_formats: list[tuple[str, str]] = field(default_factory=list)
    # (keyword, pointer, why) of subschemas a narrowing left without values (a branch of a
    # union may be left out so; a schema left empty by one is refused naming the first)
    emptied: list[tuple[str, str, str]] = field(default_factory=list)
    # (IR, JSON pointer) of every subschema conversion in the order they finished, inner ones
    # first: what :meth:`origin_of` reads (only when a product fails, so a compile pays nothing)
    converted: list[tuple[Node, str]] = field(default_factory=list)
    _origins: dict[int, tuple[Node, str]] | None = field(default=None, repr=False, compare=False)
    _counted: int = field(default=0, repr=False, compare=False)

    def origin_of(self, node: object) -> str | None:
        """The JSON pointer of the innermost subschema whose conversion built ``node`` (an
        ``And`` / ``Minus`` of the IR), or None: what a state cap or time-out in its product
        names.  The first call walks the conversions once (each IR node once)."""
        if self._origins is None or len(self.converted) != self._counted:
            self._origins = {}
            walked: dict[int, Node] = {}
            for ir, ptr in self.converted:
                for product in new_products(ir, walked):
                    self._origins[id(product)] = (product, ptr)
            self._counted = len(self.converted)
        got = self._origins.get(id(node))
        return got[1] if got is not None and got[0] is node else None
