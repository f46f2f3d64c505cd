from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structgen.fsm.nfa import compile_dfa
from structgen.schemas.ir import And
from structgen.schemas.numbers import PLAIN_NUMBER, integer_range, multiple_of_automaton, multiple_of_integer, number_range


@pytest.mark.parametrize("lo,hi", [(0, 0), (-5, 5), (3, 117), (-250, -17), (None, 42), (-42, None), (99, 1001), (None, None)])
def test_integer_range_exact(lo: int | None, hi: int | None) -> None:
    dfa = compile_dfa(integer_range(lo, hi))
    for n in range(-1300, 1300):
        inside = (lo is None or n >= lo) and (hi is None or n <= hi)
        assert dfa.accepts(str(n).encode()) == inside, n
    assert not dfa.accepts(b"-0") and not dfa.accepts(b"007") and not dfa.accepts(b"")


_decimals = st.decimals(min_value=-300, max_value=300, places=2, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(_decimals, st.booleans(), _decimals, st.booleans())
def test_number_range_exact(lo: Decimal, lo_strict: bool, hi: Decimal, hi_strict: bool) -> None:
    dfa = compile_dfa(number_range(lo, lo_strict, hi, hi_strict))
    probes = {lo, hi, lo - Decimal("0.01"), hi + Decimal("0.01"), (lo + hi) / 2, Decimal(0), Decimal("-0.5")}
    texts = []
    for p in probes:
        q = p.quantize(Decimal("0.001"))
        texts += [format(q, "f"), format(q.normalize(), "f")]
    texts += ["0", "-0", "0.0", "1.50", "-1.500", "12", "-7", "299.99", "300.001"]
    for t in texts:
        v = Decimal(t)
        inside = (v > lo if lo_strict else v >= lo) and (v < hi if hi_strict else v <= hi)
        if dfa.accepts(t.encode()):
            assert inside, (t, lo, lo_strict, hi, hi_strict)  # soundness
        elif inside and not t.startswith("-0") and (t == "0" or not t.startswith("0") or t.startswith("0.")):
            # completeness for canonical texts
            assert not inside, (t, lo, lo_strict, hi, hi_strict)


def test_number_range_one_sided() -> None:
    ge = compile_dfa(number_range(Decimal("0.5"), False, None, False))
    for t, ok in [("0.5", True), ("0.50", True), ("0.49", False), ("1", True), ("-1", False), ("0.4999", False), ("100.25", True)]:
        assert ge.accepts(t.encode()) == ok, t
    lt = compile_dfa(number_range(None, False, Decimal("-2.25"), True))
    for t, ok in [("-2.25", False), ("-2.26", True), ("-3", True), ("-2", False), ("0", False), ("-2.250001", True)]:
        assert lt.accepts(t.encode()) == ok, t


@pytest.mark.parametrize("m", [1, 2, 5, 10, 25, 100])
def test_multiple_of_integer(m: int) -> None:
    node = multiple_of_integer(m)
    assert node is not None
    dfa = compile_dfa(node)
    for n in itertools.chain(range(-500, 500), [12345, 100000, 99975]):
        assert dfa.accepts(str(n).encode()) == (n % m == 0), (m, n)


def test_multiple_of_unsupported_divisor() -> None:
    assert multiple_of_integer(3) is None


@pytest.mark.parametrize("m", ["3", "7", "0.3", "1.5", "0.07", "12.5", "2.5e3", "0.001", "1e-9", "6"])
def test_multiple_of_automaton_exact(m: str) -> None:
    """Every plain numeral (sign, leading or trailing zeros, long fractions) is accepted exactly
    when its value is a multiple of m, by exact decimal arithmetic."""
    md = Decimal(m)
    node = multiple_of_automaton(md)
    assert node is not None
    dfa = compile_dfa(And((PLAIN_NUMBER, node)))
    texts = [str(n) for n in range(-300, 300)]
    texts += [f"{n}.{f}" for n in (0, 1, 2, 3, 4, 7, 12, 21, 2500) for f in ("0", "00", "3", "5", "50", "07", "14", "9", "30", "000000001")]
    texts += [f"-{t}" for t in texts[-40:]] + ["49000", "7000007", "0.0", "-0", "-0.000", "0.0000000001", "3.14159265358"]
    texts += [format(k * md, "f") for k in range(-20, 21)]
    hits = 0
    for t in texts:
        want = Decimal(t) % md == 0
        hits += want
        assert dfa.accepts(t.encode()) == want, (m, t)
    assert 0 < hits < len(texts)


@given(st.integers(1, 999), st.integers(0, 4), st.integers(-(10**6), 10**6), st.integers(0, 6))
@settings(max_examples=300, deadline=None)
def test_multiple_of_automaton_random(num: int, scale: int, value: int, value_scale: int) -> None:
    md = Decimal(num).scaleb(-scale)
    node = multiple_of_automaton(md)
    assert node is not None
    text = format(Decimal(value).scaleb(-value_scale), "f")
    assert compile_dfa(And((PLAIN_NUMBER, node))).accepts(text.encode()) == (Decimal(text) % md == 0)


def test_multiple_of_automaton_refuses_huge_remainders() -> None:
    assert multiple_of_automaton(Decimal("123456.789")) is None
