"""A tokenizer's vocabulary as exact byte strings, plus the trie the token FSM walks.

Supports byte-level BPE (GPT-2, Llama-3, Qwen2: token text is the GPT-2 byte→unicode alias
alphabet) and SentencePiece-style vocabularies (``▁`` for a space, ``<0xNN>`` byte-fallback
tokens; Llama-2, Mistral).  Special tokens never appear in generated text: they are excluded
from the trie, and EOS is handled by the token FSM (allowed only in accepting states).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from .counted_rows import CharNeeds
from .length_product import prepare_plain_needs
from .trie import VocabTrie

__all__ = ["Vocabulary", "load_tokenizer"]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable-unicode map (openai/gpt-2 ``encoder.py``)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


_UNICODE_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}
_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def load_tokenizer(source: str | os.PathLike[str] | Any) -> Any:
    """A Hugging Face tokenizer from a local folder (or the tokenizer object itself).

    Raises ``FileNotFoundError`` when the folder does not exist.  Never contacts a hub.
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"tokenizer folder not found: {path}")
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    return source


ENCODE_MEMO = 1 << 14  # texts whose canonical ids a Vocabulary remembers (jump-forward re-tokenization)
_MISS: Any = object()  # not in the memo


class Vocabulary:
    """Token id → exact bytes for one tokenizer.

    Attributes:
        size: V, the number of token ids (``len(tokenizer)``, added tokens included); mask
            rows have ``ceil(V / 32)`` int32 words.
        token_bytes: list of V ``bytes``; ``b""`` for special tokens (never generated).
        eos_token_ids: tuple of ids that end generation.
        special_ids: frozenset of ids excluded from constrained generation.
        kind: ``"byte_level"`` or ``"sentencepiece"``.
        fingerprint: sha256 hex digest of all of the above (cache key).

    Construct with :meth:`from_tokenizer` (cached per tokenizer object / folder) or directly
    from byte strings (tests, custom vocabularies).  ``encoder`` maps text to ids for
    jump-forward retokenization; if None, jump-forward falls back to the trie's greedy
    longest-match.
    """

    _cache: ClassVar[dict[str, Vocabulary]] = {}
    _cache_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        eos_token_ids: Iterable[int],
        *,
        special_ids: Iterable[int] = (),
        kind: str = "byte_level",
        encoder: Any = None,
    ) -> None:
        self.token_bytes: list[bytes] = list(token_bytes)
        self.size = len(self.token_bytes)
        self.eos_token_ids = tuple(sorted(set(int(e) for e in eos_token_ids)))
        if not self.eos_token_ids:
            raise ValueError("a vocabulary needs at least one EOS token id")
        for e in self.eos_token_ids:
            if not 0 <= e < self.size:
                raise ValueError(f"EOS id {e} outside the vocabulary (size {self.size})")
        self.special_ids = frozenset(int(s) for s in special_ids) | frozenset(self.eos_token_ids)
        self.kind = kind
        self._encoder = encoder
        self._encoded: dict[bytes, tuple[int, ...] | None] = {}  # encode_bytes memo (never pickled)
        h = hashlib.sha256()
        h.update(kind.encode())
        h.update(repr(self.eos_token_ids).encode())
        h.update(repr(sorted(self.special_ids)).encode())
        for t in self.token_bytes:
            h.update(len(t).to_bytes(4, "little"))
            h.update(t)
        self.fingerprint = h.hexdigest()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_tokenizer(cls, source: Any, *, eos_token_ids: Iterable[int] | None = None) -> Vocabulary:
        """Build (or fetch from the per-process cache) the vocabulary of a HF tokenizer.

        ``source``: a local folder path or a ``transformers`` tokenizer.  ``eos_token_ids``
        overrides the tokenizer's EOS.  Raises ``ValueError`` for tokenizers whose decoder is
        neither byte-level nor SentencePiece-style.
        """
        key = None
        if isinstance(source, (str, os.PathLike)):
            key = os.path.realpath(os.fspath(source)) + "|" + repr(sorted(eos_token_ids or []))
            with cls._cache_lock:
                if key in cls._cache:
                    return cls._cache[key]
        tok = load_tokenizer(source)
        vocab = cls._build(tok, eos_token_ids)
        if key is not None:
            with cls._cache_lock:
                cls._cache[key] = vocab
        return vocab

    @classmethod
    def _build(cls, tok: Any, eos_token_ids: Iterable[int] | None) -> Vocabulary:
        backend = tok.backend_tokenizer if hasattr(tok, "backend_tokenizer") else tok
        spec = json.loads(backend.to_str())
        kind = _detect_kind(spec)
        size = len(tok) if hasattr(tok, "__len__") else backend.get_vocab_size(with_added_tokens=True)
        id_to_token: list[str | None] = [None] * size
        for token, idx in backend.get_vocab(with_added_tokens=True).items():
            if 0 <= idx < size:
                id_to_token[idx] = token
        special: set[int] = set()
        for added in spec.get("added_tokens", []):
            if added.get("special", False):
                special.add(int(added["id"]))
        for sid in getattr(tok, "all_special_ids", []) or []:
            special.add(int(sid))
        token_bytes: list[bytes] = []
        for idx, text in enumerate(id_to_token):
            if text is None or idx in special:
                token_bytes.append(b"")
            elif kind == "byte_level":
                try:
                    token_bytes.append(bytes(_UNICODE_TO_BYTE[c] for c in text))
                except KeyError:  # an added non-special token stored as plain text
                    token_bytes.append(text.encode())
            else:
                m = _BYTE_FALLBACK.match(text)
                token_bytes.append(bytes([int(m.group(1), 16)]) if m else text.replace("▁", " ").encode())
        if eos_token_ids is None:
            eos = getattr(tok, "eos_token_id", None)
            eos_list = [eos] if isinstance(eos, int) else list(eos or [])
        else:
            eos_list = list(eos_token_ids)
        if not eos_list:
            raise ValueError("the tokenizer has no eos_token_id; pass eos_token_ids")
        return cls(token_bytes, eos_list, special_ids=special, kind=kind, encoder=backend)

    # ------------------------------------------------------------------ queries

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``ids`` (special tokens contribute nothing)."""
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)

    def encode_bytes(self, data: bytes) -> list[int] | None:
        """The tokenizer's own (canonical) ids for ``data`` without special tokens, or None.

        None when ``data`` is not valid UTF-8 or the tokenizer's output does not spell
        ``data`` exactly.  SentencePiece tokenizers that add a dummy-prefix space are handled
        by encoding ``"\\n" + text`` and dropping the ids that spell the prefix.
        """
        if self._encoder is None:
            return None
        got = self._encoded.get(data, _MISS)
        if got is not _MISS:
            return None if got is None else list(got)
        ids = self._encode_uncached(data)
        if len(self._encoded) >= ENCODE_MEMO:
            self._encoded.clear()  # bounded; jump-forward texts recur across requests and schemas
        self._encoded[data] = None if ids is None else tuple(ids)
        return ids

    def _encode_uncached(self, data: bytes) -> list[int] | None:
        assert self._encoder is not None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        ids = list(self._encoder.encode(text, add_special_tokens=False).ids)
        if self.decode_bytes(ids) == data:
            return ids
        ids = list(self._encoder.encode("\n" + text, add_special_tokens=False).ids)
        acc = b""
        for k, i in enumerate(ids):
            acc += self.token_bytes[i]
            if acc.endswith(b"\n"):
                rest = ids[k + 1 :]
                if self.decode_bytes(rest) == data:
                    return rest
                break
        return None

    # ------------------------------------------------------------------ trie

    def prepare(self) -> None:
        """Build every per-vocabulary structure the compiler and jump-forward read (the trie
        and its compiled-walk tables, the sorted token order, byte coverage, the tokens'
        character needs in bounded strings), so that no compile or request pays for them: a
        start-up step.  Idempotent."""
        self.sorted_order  # noqa: B018
        self.sorted_flat  # noqa: B018
        self.covers_every_byte  # noqa: B018
        self.trie.prepare()
        prepare_plain_needs(self.char_needs)

    @cached_property
    def trie(self) -> VocabTrie:
        """The vocabulary trie (breadth-first and preorder layouts; built on first use)."""
        return VocabTrie(self.token_bytes, self.special_ids)

    @cached_property
    def char_needs(self) -> CharNeeds:
        """Each token's character need under a plain length product (:mod:`.counted_rows`;
        built on first use, never pickled)."""
        return CharNeeds(self.token_bytes, self.special_ids)

    @cached_property
    def max_token_bytes(self) -> int:
        """Bytes of the longest non-special token (a bound on the characters one token spells)."""
        return max((len(b) for i, b in enumerate(self.token_bytes) if i not in self.special_ids), default=0)

    @cached_property
    def covers_every_byte(self) -> bool:
        """Whether each of the 256 bytes is a (non-special) token on its own, as in byte-level
        BPE and SentencePiece with byte fallback: then any byte string is spelled by at most
        as many tokens as it has bytes."""
        return len({b[0] for i, b in enumerate(self.token_bytes) if len(b) == 1 and i not in self.special_ids}) == 256

    @cached_property
    def sorted_order(self) -> tuple[np.ndarray, list[bytes]]:
        """Token ids sorted by their bytes (specials excluded), and the sorted byte strings.

        Tokens that start with a given prefix form one contiguous run of this order.
        """
        ids = [i for i, b in enumerate(self.token_bytes) if b and i not in self.special_ids]
        ids.sort(key=lambda i: self.token_bytes[i])
        return np.array(ids, dtype=np.int64), [self.token_bytes[i] for i in ids]

    @cached_property
    def sorted_flat(self) -> tuple[np.ndarray, np.ndarray]:
        """The byte strings of :attr:`sorted_order` as one buffer, for compiled scans of a run
        of them: ``uint8 [total bytes]`` and ``int64 [K + 1]`` offsets (string ``i`` is
        ``flat[offsets[i]:offsets[i + 1]]``)."""
        strings = self.sorted_order[1]
        offsets = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in strings], out=offsets[1:])
        return np.frombuffer(b"".join(strings), dtype=np.uint8), offsets

    def __getstate__(self) -> dict[str, Any]:
        skip = ("trie", "sorted_order", "sorted_flat", "covers_every_byte", "char_needs", "_encoder", "_encoded")
        state = {k: v for k, v in self.__dict__.items() if k not in skip}
        state["_encoder_json"] = self._encoder.to_str() if self._encoder is not None else None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        enc_json = state.pop("_encoder_json", None)
        self.__dict__.update(state)
        self._encoded = {}
        if enc_json is not None:
            from tokenizers import Tokenizer

            self._encoder = Tokenizer.from_str(enc_json)
        else:
            self._encoder = None

    def __repr__(self) -> str:
        return f"Vocabulary(size={self.size}, kind={self.kind!r}, eos={self.eos_token_ids}, fp={self.fingerprint[:12]})"


def _detect_kind(spec: dict[str, Any]) -> str:
    def types(obj: Any) -> list[str]:
        if not isinstance(obj, dict):
            return []
        out = [obj.get("type", "")]
        for sub in obj.get("decoders", []) or obj.get("pretokenizers", []) or []:
            out.extend(types(sub))
        return out

    dec = types(spec.get("decoder"))
    pre = types(spec.get("pre_tokenizer"))
    if "ByteLevel" in dec or "ByteLevel" in pre:
        return "byte_level"
    if "ByteFallback" in dec or "Metaspace" in dec or "Metaspace" in pre or "Replace" in dec:
        return "sentencepiece"
    raise ValueError(
        f"unsupported tokenizer: decoder {dec or None}, pre-tokenizer {pre or None}; "
        "supported are byte-level BPE (GPT-2, Llama-3, Qwen2) and SentencePiece with byte fallback (Llama-2)"
    )
