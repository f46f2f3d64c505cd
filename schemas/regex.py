"""Regex text → the regex IR (:mod:`.ir`).

:func:`parse_regex` reads ECMA-262 / Python regex text.  Where the two dialects disagree the
parser picks the reading that is a subset of both (``\\d`` is ``[0-9]``; ``[^\\d]`` excludes
every Unicode digit), so what we generate is accepted by both ``re.search`` (which
``jsonschema`` uses) and JavaScript validators.  Constructs that are not regular or whose
meaning differs between dialects (back-references, inline flags, possessive quantifiers,
``{,n}``) raise :class:`RegexError` with the position.  Anchors, look-arounds and word
boundaries stay in the parsed IR (:class:`~.ir.Anchor`, :class:`~.ir.Look`) for
:mod:`.regex_assertions` to resolve.
"""

from __future__ import annotations

import functools
import re

from .charset import MAX_CODE_POINT, CharSet
from .errors import RegexError
from .ir import Alt, Anchor, Chars, Look, Node, Rep, Seq

# ----------------------------------------------------------------------------- classes

_ASCII_DIGIT = CharSet.of_ranges([(0x30, 0x39)])
_ASCII_WORD = CharSet.of_ranges([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
_ASCII_SPACE = CharSet.of_chars("\t\n\v\f\r ")
_ECMA_SPACE_EXTRA = CharSet.of_chars(
    "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
ECMA_DOT = CharSet.of_chars("\n\r\u2028\u2029").complement()
PYTHON_DOT = CharSet.of_chars("\n").complement()


def _python_class(escape: str) -> CharSet:
    """The code points Python's ``re`` matches with ``escape`` (``\\d``, ``\\w``, ``\\s``)."""
    return _python_classes()[escape]


@functools.cache
def _python_classes() -> dict[str, CharSet]:
    """``\\d``, ``\\w``, ``\\s`` as Python's ``re`` reads them: the runs it finds over one string
    of every code point (surrogates left out), built once per process and dropped after."""
    texts = [(lo, "".join(map(chr, range(lo, hi + 1)))) for lo, hi in ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))]
    out: dict[str, CharSet] = {}
    for escape in ("\\d", "\\w", "\\s"):
        rx = re.compile(f"(?:{escape})+")
        out[escape] = CharSet.of_ranges([(lo + m.start(), lo + m.end() - 1) for lo, text in texts for m in rx.finditer(text)])
    return out


def _narrow_class(letter: str) -> CharSet:
    """``\\d \\w \\s`` read as a subset of both their ECMA and their Python meaning."""
    return {"d": _ASCII_DIGIT, "w": _ASCII_WORD, "s": _ASCII_SPACE}[letter]


@functools.cache
def _wide_class(letter: str) -> CharSet:
    """``\\d \\w \\s`` read as a superset of both meanings (slow first call: scans Unicode)."""
    extra = _ECMA_SPACE_EXTRA if letter == "s" else CharSet.empty()
    return _narrow_class(letter).union(extra).union(_python_class("\\" + letter))


class _ClassEscape:
    """(narrow, wide) readings of a class escape; ``wide`` is computed only when needed."""

    def __init__(self, letter: str) -> None:
        self.letter = letter

    @property
    def narrow(self) -> CharSet:
        low = self.letter.lower()
        return _narrow_class(low) if self.letter == low else _wide_class(low).complement()

    @property
    def wide(self) -> CharSet:
        low = self.letter.lower()
        return _wide_class(low) if self.letter == low else _narrow_class(low).complement()


# ----------------------------------------------------------------------------- parser

_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}
_MAX_REPEAT = 100_000


class _Parser:
    def __init__(self, pattern: str, wide: bool = False) -> None:
        self.p = pattern
        self.i = 0
        self.wide = wide

    def error(self, msg: str, pos: int | None = None) -> RegexError:
        return RegexError(msg, self.p, self.i if pos is None else pos)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> Node:
        node = self.alternation()
        if self.i < len(self.p):
            raise self.error("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        branches = [self.concat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.concat())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def concat(self) -> Node:
        items: list[Node] = []
        while self.i < len(self.p) and self.peek() not in "|)":
            items.append(self.quantified())
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def quantified(self) -> Node:
        start = self.i
        atom = self.atom()
        while True:
            c = self.peek()
            qpos = self.i
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                q = self.braces()
                if q is None:
                    return atom
                lo, hi = q
            else:
                return atom
            if isinstance(atom, (Anchor, Look)):
                raise self.error("nothing to repeat: quantifier after an assertion", qpos)
            if self.peek() == "?":
                self.i += 1  # lazy: same language
            elif self.peek() == "+":
                raise self.error("possessive quantifiers are not supported (not in ECMA-262)", self.i)
            if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._is_quant_brace()):
                raise self.error("multiple repeat", self.i)
            if start == qpos:
                raise self.error("nothing to repeat", qpos)
            atom = Rep(atom, lo, hi)

    def _is_quant_brace(self) -> bool:
        return re.match(r"\{(\d+)(,(\d*))?\}", self.p[self.i :]) is not None

    def braces(self) -> tuple[int, int | None] | None:
        m = re.match(r"\{(\d*)(,(\d*))?\}", self.p[self.i :])
        if not m or (m.group(1) == "" and m.group(2) is None):
            return None  # a literal '{' in both dialects
        if m.group(1) == "":
            raise self.error("'{,n}' means {0,n} in Python but is literal text in ECMA-262")
        lo = int(m.group(1))
        hi: int | None = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        if hi is not None and hi < lo:
            raise self.error(f"min repeat greater than max repeat in '{m.group(0)}'")
        if lo > _MAX_REPEAT or (hi is not None and hi > _MAX_REPEAT):
            raise self.error(f"repeat count over {_MAX_REPEAT} in '{m.group(0)}'")
        self.i += m.end()
        return lo, hi

    def atom(self) -> Node:
        c = self.peek()
        pos = self.i
        if c == "(":
            return self.group()
        if c == "[":
            return Chars(self.bracket())
        if c == ".":
            self.i += 1
            return Chars(PYTHON_DOT if self.wide else ECMA_DOT)
        if c == "^":
            self.i += 1
            return Anchor(True, pos)
        if c == "$":
            self.i += 1
            return Anchor(False, pos)
        if c == "\\" and self.peek(1) in ("b", "B"):
            self.i += 2
            return word_boundary(self.peek(-1) == "B", pos)
        if c == "\\":
            item = self.escape()
            if isinstance(item, _ClassEscape):
                return Chars(item.wide if self.wide else item.narrow)
            return Chars(item)
        if c in "*+?":
            raise self.error("nothing to repeat")
        if c == "{" and self._is_quant_brace():
            raise self.error("nothing to repeat")
        self.i += 1
        return Chars(CharSet.of_chars(c))

    def group(self) -> Node:
        open_pos = self.i
        self.i += 1
        if self.peek() == "?":
            rest = self.p[self.i + 1 : self.i + 4]
            if rest.startswith(":"):
                self.i += 2
            elif rest.startswith(("=", "!", "<=", "<!")):
                behind = rest.startswith("<")
                self.i += 3 if behind else 2
                start = self.i
                body = self.alternation()
                if self.peek() != ")":
                    raise self.error(f"missing ')', unterminated look-{'behind' if behind else 'ahead'}", open_pos)
                self.i += 1
                return Look(rest[behind] == "!", body, start, open_pos, behind=behind)
            elif rest.startswith(("<", "P<")):
                end = self.p.find(">", self.i)
                if end < 0:
                    raise self.error("unterminated group name", open_pos)
                self.i = end + 1
            else:
                raise self.error("inline flags and extension groups '(?...)' are not supported", open_pos)
        node = self.alternation()
        if self.peek() != ")":
            raise self.error("missing ')', unterminated group", open_pos)
        self.i += 1
        return node

    def bracket(self) -> CharSet:
        open_pos = self.i
        self.i += 1
        negate = False
        if self.peek() == "^":
            negate = True
            self.i += 1
        if self.peek() == "]":
            raise self.error("'[]' / '[^]' mean different things in ECMA-262 and Python", open_pos)
        items: list[CharSet | _ClassEscape] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.error("unterminated character set", open_pos)
            if c == "]":
                self.i += 1
                break
            lo_pos = self.i
            lo, lo_cp = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                _, hi_cp = self.class_atom()
                if lo_cp is None or hi_cp is None:
                    raise self.error("bad character range: a class escape cannot bound a range", lo_pos)
                if hi_cp < lo_cp:
                    raise self.error(f"bad character range {chr(lo_cp)!r}-{chr(hi_cp)!r}", lo_pos)
                items.append(CharSet.of_ranges([(lo_cp, hi_cp)]))
            else:
                items.append(lo)
        # narrow reading: a subset of both dialects; wide: a superset (negation swaps them)
        use_wide = self.wide != negate
        out = CharSet.empty()
        for it in items:
            if isinstance(it, _ClassEscape):
                it = it.wide if use_wide else it.narrow
            out = out.union(it)
        return out.complement() if negate else out

    def class_atom(self) -> tuple[CharSet | _ClassEscape, int | None]:
        if self.peek() == "\\":
            if self.peek(1) == "b":
                self.i += 2
                return CharSet.of_chars("\b"), 8
            item = self.escape()
            return item, (item.single() if isinstance(item, CharSet) else None)
        c = self.peek()
        if c == "[" and self.peek(1) in (":", "=", "."):
            raise self.error("POSIX classes '[:...:]' are not supported")
        self.i += 1
        return CharSet.of_chars(c), ord(c)

    def escape(self) -> CharSet | _ClassEscape:
        pos = self.i
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.error("pattern ends with a lone backslash", pos)
        self.i += 1
        if c in "dDwWsS":
            return _ClassEscape(c)
        if c in _SIMPLE_ESCAPES:
            return self._one(ord(_SIMPLE_ESCAPES[c]))
        if c == "0" and not self.peek().isdigit():
            return self._one(0)
        if c.isdigit():
            raise self.error("back-references are not supported (not regular)", pos)
        if c == "x":
            m = re.match(r"[0-9a-fA-F]{2}", self.p[self.i :])
            if not m:
                raise self.error("'\\x' needs two hex digits", pos)
            self.i += 2
            return self._one(int(m.group(0), 16))
        if c == "u":
            return self._one(self.unicode_escape(pos))
        if c == "c":
            m = re.match(r"[A-Za-z]", self.p[self.i :])
            if not m:
                raise self.error("'\\c' needs a letter", pos)
            self.i += 1
            return self._one(ord(m.group(0)) % 32)
        if c == "B":  # \b in a class is a backspace (class_atom); \B has no meaning there
            raise self.error("'\\B' inside a character class", pos)
        if c in "AZzG":
            raise self.error(f"anchor '\\{c}' is not supported; use ^ and $", pos)
        if c in "pP":
            raise self.error("Unicode property escapes '\\p{...}' are not supported", pos)
        if c == "k":
            raise self.error("named back-references are not supported (not regular)", pos)
        if c.isalnum():
            raise self.error(f"bad escape '\\{c}'", pos)
        return self._one(ord(c))

    @staticmethod
    def _one(cp: int) -> CharSet:
        return CharSet.of_ranges([(cp, cp)])

    def unicode_escape(self, pos: int) -> int:
        if self.peek() == "{":
            m = re.match(r"\{([0-9a-fA-F]{1,6})\}", self.p[self.i :])
            if not m or int(m.group(1), 16) > MAX_CODE_POINT:
                raise self.error("bad '\\u{...}' escape", pos)
            self.i += m.end()
            return int(m.group(1), 16)
        m = re.match(r"[0-9a-fA-F]{4}", self.p[self.i :])
        if not m:
            raise self.error("'\\u' needs four hex digits", pos)
        self.i += 4
        cp = int(m.group(0), 16)
        if 0xD800 <= cp <= 0xDBFF:
            m2 = re.match(r"\\u(d[c-f][0-9a-f]{2})", self.p[self.i :], re.IGNORECASE)
            if m2:
                self.i += 6
                low = int(m2.group(1), 16)
                return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
        return cp


def word_boundary(negate: bool, pos: int) -> Look:
    """``\\b`` (``negate=False``) or ``\\B`` at ``pos``: one assertion node
    (``Look(word="b")``), which :mod:`.regex_assertions` resolves through
    :func:`word_boundary_parts` where it stands, so boundaries in a sequence do not multiply
    its alternatives."""
    return Look(negate, Chars(_ASCII_WORD), -1, pos, word="b")


def word_boundary_parts(item: Look, wide: bool) -> list[tuple[Look, Look]]:
    """The ways word boundary ``item`` (:func:`word_boundary`) holds, each a look-behind and a
    look-ahead of ``\\w`` or ``\\W``: ``\\b`` is ``(?<=\\w)(?!\\w)|(?<!\\w)(?=\\w)``, ``\\B`` is
    ``(?<=\\w)(?=\\w)|(?<!\\w)(?!\\w)`` (the input's ends count as non-word characters, as in
    ECMA-262 and Python).  Python's ``\\B`` (before 3.14) does not match the empty input where
    ECMA-262's does, so ``\\B`` read narrow (``wide=False``) needs a character on one side: its
    second way is then ``(?<=\\W)(?!\\w)|(?<!\\w)(?=\\W)``.  The classes are read narrow where
    they must match and wide where they must not, as every look-around's body is."""

    def part(behind: bool, neg: bool, letter: str = "w") -> Look:
        return Look(neg, item.body, -1, item.pos, behind=behind, word=letter)

    words = (part(True, False), part(False, not item.negate))
    if not item.negate:
        return [words, (part(True, True), part(False, False))]
    if wide:
        return [words, (part(True, True), part(False, True))]
    return [words, (part(True, False, "W"), part(False, True)), (part(True, True), part(False, False, "W"))]


def word_class(letter: str, wide: bool) -> CharSet:
    """``\\w`` / ``\\W`` as a word boundary reads it: narrow, what both dialects count as one
    (``\\w`` ASCII); wide, what either does."""
    escape = _ClassEscape(letter)
    return escape.wide if wide else escape.narrow


def parse_regex(pattern: str, *, wide: bool = False) -> Node:
    """Parse regex text into the IR (code-point leaves, :class:`Anchor` nodes kept).

    ``wide=False`` (for what must match): every construct read as a subset of both its ECMA-262
    and its Python meaning.  ``wide=True`` (for what must *not* match, e.g. property names that
    no ``patternProperties`` pattern may match): a superset of both.  Raises :class:`RegexError`
    with the 0-based position of the offending construct.
    """
    if not isinstance(pattern, str):
        raise RegexError(f"a regex must be a string, got {type(pattern).__name__}", str(pattern), 0)
    return _Parser(pattern, wide).parse()


def parse_alternation_at(pattern: str, start: int, *, wide: bool) -> Node:
    """Parse the alternation of ``pattern`` that begins at ``start`` up to its closing ``)``
    (a group's body, e.g. a look-ahead's), read as :func:`parse_regex` reads it."""
    parser = _Parser(pattern, wide)
    parser.i = start
    return parser.alternation()
