"""``minus_literals`` (a DFA minus a finite set of strings, straight from a trie) against the
general product of the two automata: the same minimal automaton."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from structgen.fsm.dfa import Budget, product_dfa
from structgen.fsm.literal_minus import literal_strings, minus_literals
from structgen.fsm.nfa import NFABuilder, compile_dfa
from structgen.schemas.ir import Alt, Lit, Minus, Rep, Seq
from structgen.schemas.json_strings import ANY_STRING_ENCODED
from structgen.schemas.regex_assertions import regex_to_ir

from .test_dfa_compiled import assert_isomorphic

LEFTS = [
    ANY_STRING_ENCODED,
    regex_to_ir("[a-c]{0,3}"),
    regex_to_ir("(ab|a)*c?"),
    regex_to_ir("[a-zé]+"),
    Lit(b""),
]
# short strings over bytes the lefts use and some they do not (``d``, a lone UTF-8 byte)
ALPHABET = b'abcd\xc3\xa9\\"u'
WORDS = st.lists(st.binary(max_size=4).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)), max_size=8)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.sampled_from(range(len(LEFTS))), WORDS)
def test_minus_literals_is_the_product_minus(which: int, words: list[bytes]) -> None:
    left = compile_dfa(LEFTS[which])
    right = Alt(tuple(Lit(w) for w in words))
    got = minus_literals(left, words, Budget())
    want = product_dfa(left, compile_dfa(right), Budget(), minus=True)
    assert_isomorphic(got, want)
    for w in words:
        assert not got.accepts(w)


def test_literal_strings_reads_unions_of_literals_only() -> None:
    assert literal_strings(Alt((Lit(b"a"), Alt((Lit(b"bc"), Lit(b"")))))) == [b"a", b"bc", b""]
    assert literal_strings(Lit(b"x")) == [b"x"]
    assert literal_strings(Alt((Lit(b"a"), Seq((Lit(b"b"),))))) is None
    assert literal_strings(Rep(Lit(b"a"), 0, 1)) is None
    assert literal_strings(Alt(tuple(Lit(bytes([i % 256, i // 256])) for i in range(20))), limit=10) is None


def test_builder_takes_the_trie_route_with_the_same_language() -> None:
    node = Minus(ANY_STRING_ENCODED, Alt((Lit(b"name"), Lit(b"age"), Lit(b"na"))))
    got = NFABuilder(Budget()).product(node)
    for text, ok in ((b"name", False), (b"na", False), (b"nam", True), (b"names", True), (b"", True), (b"age", False)):
        assert got.accepts(text) == ok, text
