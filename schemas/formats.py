"""Regexes for JSON Schema ``format`` values.

Each is a subset of what ``jsonschema.FormatChecker`` (with the ``format-nongpl`` extras)
accepts, so generated strings always validate; where an RFC allows more than the regex, the
narrowing is listed in the comment.  Dates are exact: day-of-month by month, 29 February only
in leap years, year 0000 excluded (``datetime.date.fromisoformat`` rejects it).
"""

from __future__ import annotations

from functools import cache

from .ir import Node
from .regex import parse_regex
from .regex_assertions import regex_to_ir, resolve_anchors

_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_DATE = (
    rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)"
)
# RFC 3339 full-time; leap second 60 is narrowed away.
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_HEX = "[0-9a-fA-F]"
_IPV4_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_IPV4_OCTET}(?:\.{_IPV4_OCTET}){{3}}"
_H16 = f"{_HEX}{{1,4}}"


def _ipv6() -> str:
    # RFC 4291 text forms without an embedded IPv4 tail (narrowing): full, and "::" compressions.
    forms = [f"(?:{_H16}:){{7}}{_H16}"]
    for left in range(0, 8):
        for right in range(0, 8 - left):
            if left + right > 7:
                continue
            lhs = "" if left == 0 else f"(?:{_H16}:){{{left - 1}}}{_H16}"
            rhs = "" if right == 0 else f"{_H16}(?::{_H16}){{{right - 1}}}"
            forms.append(f"{lhs}::{rhs}")
    return "(?:" + "|".join(forms) + ")"


_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
_TLD = r"[a-zA-Z](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
# at most 5 labels of <= 63 characters (www.bbc.co.uk, maps.wien.gv.at, s3.eu-west-1.amazonaws.com),
# which keeps the total under RFC 1035's 253 (narrowing: each label more adds ~250 DFA states).
_HOSTNAME = rf"(?:{_LABEL}\.){{0,4}}{_TLD}"
# local part: dot-atom of RFC 5322 atext without quoting (narrowing); domain: hostname with a dot.
_EMAIL = rf"[a-zA-Z0-9_+-]+(?:\.[a-zA-Z0-9_+-]+)*@(?:{_LABEL}\.){{1,4}}{_TLD}"
# absolute URI: scheme "://" reg-name host, optional port, path of unreserved/sub-delim
# characters, optional query and fragment; no percent-escapes or IP literals (narrowing).
_PCHAR = r"[a-zA-Z0-9._~!$&'()*+,;=:@-]"
_URI = (
    rf"[a-zA-Z][a-zA-Z0-9+.-]*://{_HOSTNAME}(?::[0-9]{{1,5}})?(?:/{_PCHAR}*)*"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
)

_SEG_NC = r"[a-zA-Z0-9._~!$&'()*+,;=@-]+"
# relative reference: path-noscheme / path-absolute (no colon in the first segment), query, fragment
_RELATIVE_REF = rf"(?:/?{_SEG_NC}(?:/{_PCHAR}*)*|/)?(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
# RFC 6570 URI template: literals of its ASCII literal characters (no percent-escapes or
# non-ASCII: narrowing), expressions of an optional operator and comma-separated variables,
# each with an explode or a prefix of at most 999 (narrowing: the RFC allows 9999; the checker
# takes at most three digits)
_VARSPEC = r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*(?::[1-9][0-9]{0,2}|\*)?"
_URI_TEMPLATE = rf"(?:[!#$&()*+,./0-9:;=?@A-Z\[\]_a-z~-]|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"
# ISO 8601 durations, one component (narrowing)
_DURATION = r"P(?:[0-9]+[YMWD]|T[0-9]+[HMS])"


def _regex_syntax(depth: int) -> str:
    r"""Regexes valid in both Python's ``re`` (what the checker compiles) and ECMA-262 with the
    ``u`` flag, groups nested at most ``depth`` deep (the full syntax nests without bound, so it
    is not regular).  Narrowing: literals other than the syntax characters, ``.``, the escapes
    ``\d \D \w \W \s \S \n \r \t \f \v`` and escaped syntax characters or ``/``, ``\xhh``;
    classes of such atoms and of ranges within ``0-9`` / ``a-z`` / ``A-Z`` that start at ``0`` /
    ``1`` / ``a`` / ``A`` or end at ``9`` / ``z`` / ``Z`` (no ``[``, ``&``, ``~``, ``|`` or bare ``-``
    inside); quantifiers ``* + ? {n} {n,} {n,m}`` (at most three digits; ``n ≤ m`` spelled out for
    one-digit ``n``), each optionally lazy, after an atom only; ``^ $ \b \B`` as assertions,
    never quantified; groups ``( … )`` and ``(?: … )``; no back-references, look-arounds, named
    groups or inline flags."""
    syntax = r"\\^$.|?*+()\[\]{}/"
    esc = rf"\\(?:[dDwWsSnrtfv{syntax}]|x[0-9a-fA-F]{{2}})"
    ranges = "|".join(f"[{lo}-{hi}]-{hi}|{lo}-[{lo}-{hi}]" for lo, hi in (("0", "9"), ("a", "z"), ("A", "Z")))
    ranges += "|1-[1-9]"
    cls_atom = rf"(?:[^{syntax}\-&~]|\\(?:[dDwWsSnrtfvb{syntax}\-]|x[0-9a-fA-F]{{2}}))"
    cls = rf"\[\^?(?:{ranges}|{cls_atom})+\]"
    counts = "|".join(f"{n},(?:[{n}-9]|[1-9][0-9])" for n in range(10))
    quant = rf"(?:[*+?]|\{{(?:[0-9]{{1,3}},?|{counts})\}})\??"
    assertion = r"(?:[$^]|\\[bB])"
    alternation = ""
    for level in range(depth + 1):
        group = rf"|\((?:\?:)?{alternation}\)" if level else ""
        atom = rf"(?:[^{syntax}]|\.|{esc}|{cls}{group})"
        sequence = rf"(?:{assertion}|{atom}(?:{quant})?)*"
        alternation = rf"{sequence}(?:\|{sequence})*"
    return alternation


# a pattern (format "regex"): groups nested at most three deep
_REGEX = _regex_syntax(3)


FORMAT_REGEXES: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "email": _EMAIL,
    "uuid": rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
    "uri": _URI,
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "hostname": _HOSTNAME,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE_REF})",
    "json-pointer": _JSON_POINTER,
    "uri-template": _URI_TEMPLATE,
    # narrowed: the spec's prefix is 0 | [1-9][0-9]*, but jsonschema's checker rejects any digit
    # after a 0 ("10" passes, "100" and "1019" fail), and outputs must pass jsonschema
    "relative-json-pointer": rf"(?:0|[1-9]+0?)(?:#|{_JSON_POINTER})",
    "duration": _DURATION,
    "regex": _REGEX,
    # ASCII subsets of the internationalized forms
    "idn-email": _EMAIL,
    "idn-hostname": _HOSTNAME,
    "iri": _URI,
    "iri-reference": rf"(?:{_URI}|{_RELATIVE_REF})",
}

# formats whose grammar is exactly what jsonschema's checker accepts (no narrowing; a test
# compares them on random strings), so their complement is exact too: ``not`` of them compiles
EXACT_FORMATS = frozenset({"date", "ipv4", "json-pointer"})

_IRI_CHAR = "[a-zA-Z0-9_.~!$&'()*+,;=:@/?#\\[\\]%\u00a0-\U0010ffff-]"  # the range as the characters themselves

# str.isdigit's characters beyond Python's (Unicode) \d: superscripts, subscripts, circled and
# other numbered digits (Unicode 14's No digits; a test checks the running Python has no others)
_NO_DIGITS = (
    "\u00b2\u00b3\u00b9\u1369-\u1371\u19da\u2070\u2074-\u2079\u2080-\u2089\u2460-\u2468\u2474-\u247c"
    "\u2488-\u2490\u24ea\u24f5-\u24fd\u24ff\u2776-\u277e\u2780-\u2788\u278a-\u2792"
    "\U00010a40-\U00010a43\U00010e60-\U00010e68\U00011052-\U0001105a\U0001f100-\U0001f10a"
)

# For ``not``: a superset of every string ``jsonschema``'s checker accepts, read wide (``\d``,
# ``\w``, ``\s`` and ``.`` as Python's Unicode classes), so the strings *outside* it fail the
# format for certain: the complement of a format whose grammar is a narrowing compiles as a
# narrowing (strings the checker rejects but the superset holds are not generated).  Each is
# checked against the checker on generated near misses.
WIDE_FORMAT_REGEXES: dict[str, str] = {
    # rfc3339_validator on the upper-cased text; its `$` also matches before a final newline
    "date-time": r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})\n?",
    # fqdn's labels match [a-z\d-] under IGNORECASE: Unicode digits, and letters folding to ASCII
    "hostname": r"[\w.-]+\n?",
    "ipv6": r"[0-9A-Fa-f:.]{2,}",  # ipaddress: ASCII hex groups, dotted IPv4 tails; scope ids fail
    # rfc3986_validator: a scheme, then the characters of RFC 3986's grammar
    "uri": r"[a-zA-Z][a-zA-Z0-9+.-]*:[a-zA-Z0-9_.~!$&'()*+,;=:@/?#\[\]%-]*\n?",
    "uri-reference": r"[a-zA-Z0-9_.~!$&'()*+,;=:@/?#\[\]%-]*\n?",
    # uuid.UUID strips and int() reads whitespace, underscores and Unicode digits; '-' at 8/13/18/23
    "uuid": r"[\s\S]{8}-[\s\S]{4}-[\s\S]{4}-[\s\S]{4}-[\s\S]{12,}",
    "duration": r"[+-]?P[\s\S]*[DMYWHS]",  # isoduration, and jsonschema's check of the last letter
    "email": r"[\s\S]*@[\s\S]*",  # jsonschema checks for an '@' (exact)
    "idn-email": r"[\s\S]*@[\s\S]*",
    # rfc3987-syntax: a scheme, then IRI characters (RFC 3987's ASCII set, and every character
    # from U+00A0 up, which holds its ucschar and iprivate ranges)
    "iri": rf"[a-zA-Z][a-zA-Z0-9+.-]*:{_IRI_CHAR}*",
    "iri-reference": rf"{_IRI_CHAR}*",
    # the checker reads a time as the date-time "1970-01-01T" + it
    "time": r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})\n?",
    # uri_template splits on "{…}" (no "}" inside) and refuses a literal part holding a brace
    "uri-template": r"(?:[^{}]|\{[^}]*\})*",
    # the checker reads a prefix of str.isdigit characters (int() of each), then "#", nothing,
    # or a JSON pointer (which starts with "/")
    "relative-json-pointer": rf"(?:\d|[{_NO_DIGITS}])+(?:#|/[\s\S]*)?",
    # idna.encode: labels of letters, digits and hyphens in ASCII (either case), dots (and the
    # Unicode full stops) between them; every other ASCII character fails, any non-ASCII may pass
    "idn-hostname": r"(?:[A-Za-z0-9.-]|[^\x00-\x7f])+",
}

# checked formats with no regular superset short of every string (whether ``re`` compiles a
# pattern depends on nesting): no string is known to fail them, so ``not`` of them holds none
NO_WIDE_FORMATS = frozenset({"regex"})

# formats defined by JSON Schema 2020-12 (validation spec §7.3); others are annotations only
STANDARD_FORMATS = frozenset(
    {
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    }
)


@cache  # IR nodes are immutable: each format parsed once per process
def wide_format_ir(name: str) -> Node | None:
    """The IR of a superset of the strings (code points) ``jsonschema``'s checker accepts for
    format ``name`` (:data:`WIDE_FORMAT_REGEXES`), or None."""
    rx = WIDE_FORMAT_REGEXES.get(name)
    return None if rx is None else resolve_anchors(parse_regex(rx, wide=True), rx, search=False, wide=True)


@cache
def format_ir(name: str) -> Node | None:
    """The IR of a supported format's *decoded* string (code points), or None if unsupported."""
    rx = FORMAT_REGEXES.get(name)
    return None if rx is None else regex_to_ir(rx)
