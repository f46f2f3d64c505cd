"""Exact regexes for bounded JSON numbers.

Integers use the canonical form ``-?(0|[1-9][0-9]*)``; bounded numbers use the same plus an
optional fraction and never an exponent (a documented narrowing).  Ranges are built digit by
digit (the classic range-to-regex construction, as in ``to-regex-range`` or Hypothesis'
``from_regex`` tests), and two-sided decimal bounds are the intersection (IR ``And``) of a
lower-bound and an upper-bound language, so every accepted text satisfies the bounds exactly.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

from .charset import CharSet
from .ir import EPSILON, NOTHING, And, Automaton, Node, alt, chars, lit, opt, rep, seq

DIGIT = chars(CharSet.of_ranges([(0x30, 0x39)]))
NONZERO = chars(CharSet.of_ranges([(0x31, 0x39)]))
_ZERO = lit("0")
UNSIGNED_INT = alt(lit("0"), seq(NONZERO, rep(DIGIT, 0, None)))
INTEGER = seq(opt(lit("-")), UNSIGNED_INT)
FRACTION = seq(lit("."), rep(DIGIT, 1, None))
EXPONENT = seq(chars(CharSet.of_chars("eE")), opt(chars(CharSet.of_chars("+-"))), rep(DIGIT, 1, None))
NUMBER = seq(INTEGER, opt(FRACTION), opt(EXPONENT))
_OPT_FRACTION = opt(FRACTION)
# A decimal with a fraction that is not integral and has at most 14 significant digits (7 + 7),
# no exponent.  Distinct such texts parse to distinct doubles (15 digits round-trip), so value
# equality on them is text equality: the layout of numbers under ``not`` of values or of
# ``type: integer`` (a documented narrowing).
SHORT_FRACTIONAL = seq(opt(lit("-")), alt(lit("0"), seq(NONZERO, rep(DIGIT, 0, 6))), lit("."), rep(DIGIT, 0, 6), NONZERO)
SHORT_NUMBER = alt(INTEGER, SHORT_FRACTIONAL)


def _digits(lo: str, hi: str) -> Node:
    return chars(CharSet.of_ranges([(ord(lo), ord(hi))]))


def _at_least(z: str) -> Node:
    """Digit strings w of len(z) with w >= z: z itself, or z's first i digits, a larger digit,
    then any digits.  A flat alternation, so IR depth does not grow with the digit count."""
    parts: list[Node] = [lit(z)]
    for i, ch in enumerate(z):
        if ch < "9":
            parts.append(seq(lit(z[:i]), _digits(chr(ord(ch) + 1), "9"), rep(DIGIT, len(z) - i - 1, len(z) - i - 1)))
    return alt(*parts)


def _at_most(z: str) -> Node:
    """Digit strings w of len(z) with w <= z (flat, as :func:`_at_least`)."""
    parts: list[Node] = [lit(z)]
    for i, ch in enumerate(z):
        if ch > "0":
            parts.append(seq(lit(z[:i]), _digits("0", chr(ord(ch) - 1)), rep(DIGIT, len(z) - i - 1, len(z) - i - 1)))
    return alt(*parts)


def _same_length(x: str, y: str) -> Node:
    """Digit strings of len(x) between x and y inclusive (x <= y, same length): the common
    prefix, then the first differing digit at x's, between, or at y's, each followed by a flat
    alternation (bounded IR depth for numbers of hundreds of digits)."""
    if x == y:
        return lit(x)
    k = 0
    while x[k] == y[k]:
        k += 1
    prefix, x, y = x[:k], x[k:], y[k:]
    n = len(x)
    if n == 1:
        return seq(lit(prefix), _digits(x, y))
    if set(x[1:]) == {"0"} and set(y[1:]) == {"9"}:
        return seq(lit(prefix), _digits(x[0], y[0]), rep(DIGIT, n - 1, n - 1))
    parts = [seq(lit(x[0]), _at_least(x[1:]))]
    if int(x[0]) + 1 <= int(y[0]) - 1:
        parts.append(seq(_digits(str(int(x[0]) + 1), str(int(y[0]) - 1)), rep(DIGIT, n - 1, n - 1)))
    parts.append(seq(lit(y[0]), _at_most(y[1:])))
    return seq(lit(prefix), alt(*parts))


def unsigned_range(lo: int, hi: int | None) -> Node:
    """Canonical unsigned integers n with lo <= n <= hi (hi None: unbounded); lo >= 0."""
    if lo < 0:
        raise ValueError("unsigned_range needs lo >= 0")
    if hi is not None and hi < lo:
        return NOTHING
    parts: list[Node] = []
    top_len = len(str(hi)) if hi is not None else len(str(lo))
    for d in range(len(str(lo)), top_len + 1):
        a = lo if d == len(str(lo)) else 10 ** (d - 1)
        b = hi if (hi is not None and d == len(str(hi))) else 10**d - 1
        if a <= b:
            parts.append(_same_length(str(a), str(b)))
    if hi is None:
        parts.append(seq(NONZERO, rep(DIGIT, top_len, None)))
    return alt(*parts) if parts else NOTHING


def integer_range(lo: int | None, hi: int | None) -> Node:
    """Canonical integers in [lo, hi] (None = unbounded).  Never emits ``-0``."""
    if lo is not None and hi is not None and hi < lo:
        return NOTHING
    parts: list[Node] = []
    if hi is None or hi >= 0:
        parts.append(unsigned_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        mag_lo = max(1, -hi) if hi is not None else 1
        mag_hi = -lo if lo is not None else None
        if mag_hi is None or mag_lo <= mag_hi:
            parts.append(seq(lit("-"), unsigned_range(mag_lo, mag_hi)))
    return alt(*parts) if parts else NOTHING


def to_decimal(value: object) -> Decimal:
    """A JSON number as an exact Decimal (floats via their shortest repr). ValueError if not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    try:
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as e:  # pragma: no cover - repr of a finite float always parses
        raise ValueError(f"not a number: {value!r}") from e


def _split(d: Decimal) -> tuple[int, str]:
    """Non-negative decimal → (integer part, fraction digits without trailing zeros)."""
    text = format(d, "f")
    ip, _, fp = text.partition(".")
    return int(ip), fp.rstrip("0")


def _frac_ge(fp: str, strict: bool) -> Node:
    """Optional fraction text ('.' digits) whose value is >= 0.fp (> when strict)."""
    parts: list[Node] = []
    if fp == "" and not strict:
        parts.append(EPSILON)
    for i, ch in enumerate(fp):
        if ch < "9":
            parts.append(seq(lit("." + fp[:i]), _digits(chr(ord(ch) + 1), "9"), rep(DIGIT, 0, None)))
    rest = seq(rep(DIGIT, 0, None), NONZERO, rep(DIGIT, 0, None)) if strict else rep(DIGIT, 0 if fp else 1, None)
    parts.append(seq(lit("." + fp), rest))
    return alt(*parts)


def _frac_le(fp: str, strict: bool) -> Node:
    """Optional fraction text whose value is <= 0.fp (< when strict)."""
    parts: list[Node] = []
    if not strict or fp:
        parts.append(EPSILON)
    for i, ch in enumerate(fp):
        if ch > "0":
            parts.append(seq(lit("." + fp[:i]), _digits("0", chr(ord(ch) - 1)), rep(DIGIT, 0, None)))
        if i >= 1:
            parts.append(lit("." + fp[:i]))
    if not strict:
        parts.append(seq(lit("." + fp), rep(_ZERO, 0 if fp else 1, None)))
    return alt(*parts)


def _magnitude_ge(d: Decimal, strict: bool) -> Node:
    ip, fp = _split(d)
    return alt(seq(unsigned_range(ip + 1, None), _OPT_FRACTION), seq(lit(str(ip)), _frac_ge(fp, strict)))


def _magnitude_le(d: Decimal, strict: bool) -> Node:
    ip, fp = _split(d)
    below = seq(unsigned_range(0, ip - 1), _OPT_FRACTION) if ip >= 1 else NOTHING
    return alt(below, seq(lit(str(ip)), _frac_le(fp, strict)))


_ANY_MAGNITUDE = seq(UNSIGNED_INT, _OPT_FRACTION)


def _number_ge(lo: Decimal, strict: bool) -> Node:
    if lo > 0 or (lo == 0 and strict):
        return _magnitude_ge(lo, strict)
    if lo == 0:
        return _ANY_MAGNITUDE
    return alt(_ANY_MAGNITUDE, seq(lit("-"), _magnitude_le(-lo, strict)))


def _number_le(hi: Decimal, strict: bool) -> Node:
    if hi < 0 or (hi == 0 and strict):
        return seq(lit("-"), _magnitude_ge(-hi, strict))
    negatives = seq(lit("-"), _ANY_MAGNITUDE)
    return alt(negatives, _magnitude_le(hi, strict))


def number_range(lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Node:
    """Decimal numbers (no exponent) within the bounds; None = unbounded on that side."""
    if lo is not None and hi is not None and (hi < lo or (hi == lo and (lo_strict or hi_strict))):
        return NOTHING
    if lo is None and hi is None:
        return NUMBER
    if hi is None:
        assert lo is not None
        return _number_ge(lo, lo_strict)
    if lo is None:
        return _number_le(hi, hi_strict)
    return And((_number_ge(lo, lo_strict), _number_le(hi, hi_strict)))


def integer_bounds(lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> tuple[int | None, int | None]:
    """Integer [lo, hi] equivalent to possibly fractional, possibly exclusive bounds."""
    ilo = None if lo is None else (math.floor(lo) + 1 if lo_strict else math.ceil(lo))
    ihi = None if hi is None else (math.ceil(hi) - 1 if hi_strict else math.floor(hi))
    return ilo, ihi


def multiple_of_integer(m: int) -> Node | None:
    """Canonical integers divisible by ``m`` when divisibility is decided by the last digits
    (``m`` divides a power of ten: 2^a·5^b); otherwise None (the caller reports it)."""
    if m <= 0:
        return None
    k = 0
    while 10**k % m:
        k += 1
        if k > 6:
            return None
    if k == 0:
        return INTEGER
    endings = [str(x).zfill(k) for x in range(0, 10**k, m)]
    # short numbers (fewer than k+1 digits) are enumerated, longer ones end with an allowed ending
    small = [lit(str(x)) for x in range(0, 10**k, m)]
    long_form = seq(NONZERO, rep(DIGIT, 0, None), alt(*[lit(e) for e in endings]))
    mag = alt(*small, long_form)
    return seq(opt(lit("-")), mag)


def multiple_of_decimal(m: Decimal, max_fraction_digits: int = 4) -> Node | None:
    """Decimal numbers (no exponent) that are multiples of ``m = p / 10^q``, when ``p`` divides
    ``10^q`` (0.25, 0.5, 0.01, 0.125, ...): then x is a multiple iff its first q fraction
    digits, as an integer, are a multiple of p and the rest are zeros.  None otherwise."""
    m = m.normalize()
    exp = m.as_tuple().exponent
    if not isinstance(exp, int) or exp >= 0:
        return None
    q = -exp
    p = int(m.scaleb(q))
    if q > max_fraction_digits or (10**q) % p:
        return None
    fractions: list[Node] = []
    for value in range(p, 10**q, p):
        digits = str(value).zfill(q).rstrip("0")
        fractions.append(lit("." + digits))
    zeros = rep(_ZERO, 0, None)
    frac = seq(alt(*fractions), zeros) if fractions else NOTHING
    return seq(INTEGER, opt(alt(frac, seq(lit("."), rep(_ZERO, 1, None)))))


MAX_REMAINDER_STATES = 20_000  # states of the automaton of multipleOf (before minimization)
# decimals with no exponent: the layout of numbers under ``not: {multipleOf: …}`` (a narrowing)
PLAIN_NUMBER = seq(INTEGER, opt(FRACTION))


def multiple_of_automaton(m: Decimal) -> Node | None:
    """Numerals ``-?[0-9]+(\\.[0-9]+)?`` (no exponent; leading zeros allowed: intersect with a
    number layout) whose value is an exact multiple of ``m > 0``, as an :class:`Automaton`.

    Write ``m = a / b`` in lowest terms and ``b = 2^i 5^j b'`` with ``b'`` prime to 10.  A
    multiple of ``m`` with a finite decimal expansion is a multiple of ``a / (2^i 5^j)``, so
    with ``F = max(i, j)`` fraction digits ``x·10^F`` is an integer divisible by
    ``M = a·2^(F-i)·5^(F-j)``.  The automaton reads the digits left to right keeping the
    remainder mod ``M`` and the fraction digits read so far (at most ``F``; past ``F`` only
    zeros), and accepts when ``r·10^(F-f) ≡ 0 (mod M)``: about ``M·(F+2)`` states (the
    remainder automaton of divisibility in base 10, e.g. Hopcroft, Motwani & Ullman, ex. 2.2.5).
    None when that exceeds :data:`MAX_REMAINDER_STATES` (the caller reports it).
    """
    a, b = m.as_integer_ratio()
    if a <= 0:
        return None
    i = j = 0
    while b % 2 == 0:
        b, i = b // 2, i + 1
    while b % 5 == 0:
        b, j = b // 5, j + 1
    f_max = max(i, j)
    mod = a * 2 ** (f_max - i) * 5 ** (f_max - j)
    if mod * (f_max + 2) + 3 > MAX_REMAINDER_STATES:
        return None

    # state ids: 0 start, 1 after "-", 2+r integer part, 2+M+r after ".", fraction digit f at
    # 2+2M+(f-1)M+r (f = 1..F), then one "only zeros" state
    def integer(r: int) -> int:
        return 2 + r

    def dot(r: int) -> int:
        return 2 + mod + r

    def fraction(r: int, f: int) -> int:
        return 2 + 2 * mod + (f - 1) * mod + r

    zeros = 2 + 2 * mod + f_max * mod
    n = zeros + 1
    edges: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    accepting = [False] * n

    def digits(q: int, target_of: list[int | None]) -> None:
        for d, target in enumerate(target_of):
            if target is not None:
                edges[q].append((0x30 + d, 0x30 + d, target))

    edges[0].append((0x2D, 0x2D, 1))
    first = [integer(d % mod) for d in range(10)]
    digits(0, list(first))
    digits(1, list(first))
    for r in range(mod):
        q = integer(r)
        accepting[q] = (r * 10**f_max) % mod == 0
        digits(q, [integer((10 * r + d) % mod) for d in range(10)])
        edges[q].append((0x2E, 0x2E, dot(r)))
        if f_max:
            digits(dot(r), [fraction((10 * r + d) % mod, 1) for d in range(10)])
        elif r == 0:
            digits(dot(r), [zeros] + [None] * 9)
        for f in range(1, f_max + 1):
            q = fraction(r, f)
            accepting[q] = (r * 10 ** (f_max - f)) % mod == 0
            if f < f_max:
                digits(q, [fraction((10 * r + d) % mod, f + 1) for d in range(10)])
            elif r == 0:
                digits(q, [zeros] + [None] * 9)
    accepting[zeros] = True
    digits(zeros, [zeros] + [None] * 9)
    merged = tuple(tuple(_merge_runs(out)) for out in edges)
    return Automaton(f"multipleOf {m.normalize()}", merged, tuple(accepting))


def _merge_runs(out: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Adjacent byte ranges with one target merged (fewer edges to store and compile)."""
    merged: list[tuple[int, int, int]] = []
    for lo, hi, target in sorted(out):
        if merged and merged[-1][2] == target and merged[-1][1] + 1 == lo:
            merged[-1] = (merged[-1][0], hi, target)
        else:
            merged.append((lo, hi, target))
    return merged
