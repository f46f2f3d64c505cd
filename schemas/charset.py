"""Sets of Unicode code points as sorted, disjoint, inclusive ranges.

A :class:`CharSet` is the alphabet unit of the regex IR (``schemas.regex``): every literal,
``.``, ``\\d`` or bracket class becomes one.  The byte-level automaton builder expands a set
into UTF-8 byte-range sequences with :func:`utf8_sequences` (the range-splitting algorithm of
RE2 and Rust's ``regex-syntax`` ``utf8`` module, re-implemented here).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


@dataclass(frozen=True, slots=True)
class CharSet:
    """An immutable set of code points.

    ``ranges`` is a tuple of inclusive ``(lo, hi)`` pairs, sorted and non-adjacent; construct
    through :meth:`of_ranges` / :meth:`of_chars`, which normalise.  Surrogates may be members;
    they are dropped when encoding to UTF-8 (they have no UTF-8 form and are invalid JSON text).
    """

    ranges: tuple[tuple[int, int], ...]

    @staticmethod
    def of_ranges(ranges: Iterable[tuple[int, int]]) -> CharSet:
        """Normalise ``ranges`` (any order, overlapping allowed) into a CharSet."""
        items = sorted((lo, hi) for lo, hi in ranges if lo <= hi)
        out: list[tuple[int, int]] = []
        for lo, hi in items:
            if out and lo <= out[-1][1] + 1:
                if hi > out[-1][1]:
                    out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
        return CharSet(tuple(out))

    @staticmethod
    def of_chars(chars: str) -> CharSet:
        """The set of the characters in ``chars``."""
        return CharSet.of_ranges((ord(c), ord(c)) for c in chars)

    @staticmethod
    def any() -> CharSet:
        return CharSet(((0, MAX_CODE_POINT),))

    @staticmethod
    def empty() -> CharSet:
        return CharSet(())

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, cp: object) -> bool:
        if isinstance(cp, str):
            cp = ord(cp)
        return any(lo <= cp <= hi for lo, hi in self.ranges)  # type: ignore[operator]

    def union(self, other: CharSet) -> CharSet:
        return CharSet.of_ranges(self.ranges + other.ranges)

    def complement(self) -> CharSet:
        out: list[tuple[int, int]] = []
        nxt = 0
        for lo, hi in self.ranges:
            if lo > nxt:
                out.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= MAX_CODE_POINT:
            out.append((nxt, MAX_CODE_POINT))
        return CharSet(tuple(out))

    def intersect(self, other: CharSet) -> CharSet:
        return self.complement().union(other.complement()).complement()

    def difference(self, other: CharSet) -> CharSet:
        return self.intersect(other.complement())

    def single(self) -> int | None:
        """The only member, or None when the set has zero or several members."""
        if len(self.ranges) == 1 and self.ranges[0][0] == self.ranges[0][1]:
            return self.ranges[0][0]
        return None

    def size(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)


def utf8_sequences(cs: CharSet) -> list[tuple[tuple[int, int], ...]]:
    """UTF-8 encodings of ``cs`` as byte-range sequences, surrogates excluded.

    Returns a list of sequences; each sequence is a tuple of inclusive byte ranges
    ``(lo, hi)`` of length 1-4, and the byte strings matched by the union of sequences are
    exactly the UTF-8 encodings of the members of ``cs``.  Algorithm: split each range at
    encoding-length and continuation-byte boundaries until the first and last code point of
    every piece share all but their varying bytes (RE2 ``UTF8Range``, Rust ``Utf8Sequences``).
    """
    return list(_utf8_sequences_cached(cs.ranges))


@functools.lru_cache(maxsize=4096)
def _utf8_sequences_cached(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[int, int], ...], ...]:
    out: list[tuple[tuple[int, int], ...]] = []
    stack = [r for r in reversed(ranges)]
    while stack:
        lo, hi = stack.pop()
        if lo > hi:
            continue
        if lo <= SURROGATES[1] and hi >= SURROGATES[0]:
            stack.append((SURROGATES[1] + 1, hi))
            stack.append((lo, SURROGATES[0] - 1))
            continue
        split = False
        for max_cp in (0x7F, 0x7FF, 0xFFFF):
            if lo <= max_cp < hi:
                stack.append((max_cp + 1, hi))
                stack.append((lo, max_cp))
                split = True
                break
        if split:
            continue
        if hi <= 0x7F:
            out.append(((lo, hi),))
            continue
        for i in (1, 2, 3):
            m = (1 << (6 * i)) - 1
            if (lo & ~m) != (hi & ~m):
                if lo & m:
                    stack.append(((lo | m) + 1, hi))
                    stack.append((lo, lo | m))
                    split = True
                    break
                if (hi & m) != m:
                    stack.append((hi & ~m, hi))
                    stack.append((lo, (hi & ~m) - 1))
                    split = True
                    break
        if split:
            continue
        a, b = chr(lo).encode(), chr(hi).encode()
        out.append(tuple(zip(a, b)))
    return tuple(out)
