"""Shared fixtures: the vendored GPT-2 tokenizer, a tiny hand-built vocabulary, ../shared paths."""

from __future__ import annotations

import os

import pytest
from structgen.fsm.vocab import Vocabulary

HERE = os.path.dirname(os.path.abspath(__file__))
GPT2_DIR = os.path.join(HERE, "fixtures", "gpt2")
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "fixtures"))


def shared_path(*parts: str) -> str:
    """A path under ../shared/fixtures; the test is skipped when it does not exist."""
    p = os.path.join(SHARED, *parts)
    if not os.path.exists(p):
        pytest.skip(f"../shared fixture not available: {p}")
    return p


@pytest.fixture(scope="session")
def gpt2_vocab() -> Vocabulary:
    return Vocabulary.from_tokenizer(GPT2_DIR)


TINY_TOKENS = [
    b"<eos>",
    b"{",
    b"}",
    b'"',
    b'{"',
    b'":',
    b'": ',
    b" ",
    b"a",
    b"b",
    b"ab",
    b"ba",
    b"1",
    b"12",
    b"2",
    b",",
    b", ",
    b'"a',
    b'a"',
    b"\xc3",
    b"\xa9",
    b"\xc3\xa9",
    b"[",
    b"]",
    b'", "',
]


@pytest.fixture(scope="session")
def tiny_vocab() -> Vocabulary:
    """Hand-built vocabulary: id 0 is EOS (special); multibyte 'é' split and whole."""
    return Vocabulary(TINY_TOKENS, eos_token_ids=[0], special_ids=[0])
