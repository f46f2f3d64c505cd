"""``Cursor``: the cheap per-request view of a compiled :class:`~.token_fsm.TokenFSM` (its states
so far, advance, rollback), and jump-forward decoding: SGLang's compressed FSM (Zheng et al.
2024, "SGLang: Efficient Execution of Structured Language Model Programs", §4) with the DFA's
per-state forced byte string, canonical retokenization of the last tokens and llguidance's
back-off rule (``fast_forward.md``): a trailing forced token is dropped when a longer allowed
token starts with it."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .token_fsm import TokenFSM

_JUMP_PLAN_MEMO = 1 << 16  # memoized jump-forward plans per FSM (cleared when full)


class TokenRejectedError(ValueError):
    """A token that the FSM does not allow in the cursor's current state."""


class JumpForward(NamedTuple):
    """Result of :meth:`Cursor.jump_forward`.

    ``rollback``: how many already-emitted tokens to discard (their KV slots are freed);
    ``token_ids``: the forced ids to append (one extend step); ``state``: FSM state after them.
    """

    rollback: int
    token_ids: list[int]
    state: int


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


def utf8_complete_prefix(data: bytes | bytearray) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 sequence."""
    n = len(data)
    i = n - 1
    back = 0
    while i >= 0 and back < 4 and 0x80 <= data[i] <= 0xBF:
        i -= 1
        back += 1
    if i < 0:
        return n
    lead = data[i]
    need = 1 if lead < 0x80 else 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
    return n if n - i >= need else i


class Cursor:
    """Per-request position in a :class:`TokenFSM` (cheap: a list of states and tokens).

    ``advance`` / ``rollback`` / ``jump_forward`` change the cursor; every other method is a
    pure query.
    """

    __slots__ = ("_states", "_tokens", "finished", "fsm")

    def __init__(self, fsm: TokenFSM) -> None:
        self.fsm = fsm
        self._states = [fsm.initial]
        self._tokens: list[int] = []
        self.finished = False

    @property
    def state(self) -> int:
        return self._states[-1]

    @property
    def num_tokens(self) -> int:
        """Tokens advanced so far (EOS excluded)."""
        return len(self._tokens)

    def is_accepting(self) -> bool:
        return self.fsm.is_accepting(self._states[-1])

    def is_allowed(self, token_id: int) -> bool:
        return not self.finished and self.fsm.next_state(self._states[-1], token_id) >= 0

    @property
    def mask_row_index(self) -> int:
        """Row index (into ``fsm.mask_rows()``) of the current state's token bitmask (the row
        itself: ``fsm.mask_row(cursor.state)``)."""
        return self.fsm.mask_row_index(self._states[-1])

    def budget_row_index(self, tokens_left: int) -> int:
        """Row index of the current state's bitmask restricted to ``tokens_left`` tokens
        (:meth:`BudgetRows.row_index`)."""
        return self.fsm.budgets.row_index(self._states[-1], tokens_left)

    def advance(self, token_id: int) -> None:
        """Consume ``token_id``.  EOS in an accepting state finishes the cursor.

        Raises :class:`TokenRejectedError` if the token is not allowed (cursor unchanged).
        """
        if self.finished:
            raise TokenRejectedError(f"token {token_id} after the FSM finished")
        nxt = self.fsm.next_state(self._states[-1], token_id)
        if nxt < 0:
            raise TokenRejectedError(f"token {token_id} is not allowed in FSM state {self._states[-1]}")
        if token_id in self.fsm.vocab.eos_token_ids:
            self.finished = True
            return
        self._states.append(nxt)
        self._tokens.append(token_id)

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` advanced tokens (also un-finishes).  Raises ``ValueError`` if
        fewer than ``n`` tokens were advanced."""
        if n < 0 or n > len(self._tokens):
            raise ValueError(f"cannot roll back {n} tokens; {len(self._tokens)} advanced")
        self.finished = False
        if n:
            del self._states[-n:]
            del self._tokens[-n:]

    def jump_forward(self, recent_token_ids: Sequence[int] | None = None, *, max_rollback: int = 3) -> JumpForward | None:
        """Apply jump-forward: roll back and append the forced tokens; None if nothing forced.

        ``recent_token_ids``: the caller's last emitted ids (checked against the cursor's own
        history; None uses the cursor's).  Up to ``max_rollback`` of them are re-tokenized
        together with the forced bytes so the result is the tokenizer's canonical encoding:

        1. decode the last k ≤ ``max_rollback`` tokens and append the forced bytes (cut to a
           whole UTF-8 character);
        2. re-tokenize with the tokenizer;
        3. keep the longest prefix the FSM accepts from the state before those k tokens, which
           must cover the k tokens' bytes;
        4. drop a trailing token while some allowed token is a strict extension of it (it
           could merge with what is generated next);
        5. return (tokens to roll back, forced ids, new state).

        Without a usable tokenizer encoding (e.g. bytes that are not UTF-8) it falls back to
        greedy longest-match over the vocabulary with k = 0.
        """
        plan = self.peek_jump_forward(recent_token_ids, max_rollback=max_rollback)
        if plan is not None:
            self.apply_jump_forward(plan)
        return plan

    def apply_jump_forward(self, plan: JumpForward) -> None:
        """Roll back ``plan.rollback`` tokens and advance through ``plan.token_ids`` (a plan
        from :meth:`peek_jump_forward` on this cursor as it is now).  Raises ``ValueError``
        (too many tokens to roll back) or :class:`TokenRejectedError` (a token the FSM does not
        allow there) for a plan that does not fit, leaving the cursor unchanged."""
        if plan.rollback < 0 or plan.rollback > len(self._tokens):
            raise ValueError(f"cannot roll back {plan.rollback} tokens; {len(self._tokens)} advanced")
        state = self._states[len(self._states) - 1 - plan.rollback]
        for t in plan.token_ids:
            nxt = self.fsm.next_state(state, t)
            if nxt < 0 or t in self.fsm.vocab.eos_token_ids:
                raise TokenRejectedError(f"jump-forward token {t} is not allowed in FSM state {state}")
            state = nxt
        self.rollback(plan.rollback)
        for t in plan.token_ids:
            self.advance(t)

    def peek_jump_forward(self, recent_token_ids: Sequence[int] | None = None, *, max_rollback: int = 3) -> JumpForward | None:
        """Like :meth:`jump_forward` but a pure query (the cursor is unchanged)."""
        if self.finished:
            return None
        fsm = self.fsm
        forced = fsm.forced_bytes(self._states[-1])
        if not forced:
            return None
        if recent_token_ids is not None:
            n = min(len(recent_token_ids), len(self._tokens))
            if n and list(recent_token_ids)[-n:] != self._tokens[-n:]:
                raise ValueError("recent_token_ids do not match the tokens this cursor advanced")
        k = min(max_rollback, len(self._tokens))
        vocab = fsm.vocab
        while k > 0 and vocab.token_bytes[self._tokens[-k]][:1] and 0x80 <= vocab.token_bytes[self._tokens[-k]][0] <= 0xBF:
            k -= 1  # never start re-tokenization inside a UTF-8 sequence
        # The plan depends only on the state k tokens back and those tokens (they fix the
        # current state, hence the forced bytes), so it is memoized per FSM.
        key = (self._states[len(self._states) - 1 - k], tuple(self._tokens[len(self._tokens) - k :]))
        memo = fsm._jump_plans
        if key in memo:
            return memo[key]
        plan = None
        for kk in (k, 0) if k else (0,):
            plan = self._plan(kk, forced)
            if plan is not None:
                break
        else:
            plan = self._plan_greedy(forced)
        if len(memo) >= _JUMP_PLAN_MEMO:
            memo.clear()
        memo[key] = plan
        return plan

    def _plan(self, k: int, forced: bytes) -> JumpForward | None:
        fsm = self.fsm
        vocab = fsm.vocab
        old = self._tokens[len(self._tokens) - k :]
        ctx = vocab.decode_bytes(old)
        text = ctx + forced
        cut = utf8_complete_prefix(text)
        if cut <= len(ctx):
            return None
        ids = vocab.encode_bytes(text[:cut])
        if ids is None:
            return None
        start = self._states[len(self._states) - 1 - k]
        states = [start]
        kept: list[int] = []
        for t in ids:
            nxt = fsm.next_state(states[-1], t)
            if nxt < 0 or t in vocab.special_ids:
                break
            kept.append(t)
            states.append(nxt)
        kept, states = self._back_off(kept, states)
        covered = len(vocab.decode_bytes(kept))
        if covered <= len(ctx):
            return None
        common = 0
        while common < min(len(old), len(kept)) and old[common] == kept[common]:
            common += 1
        return JumpForward(rollback=k - common, token_ids=kept[common:], state=states[len(kept)])

    def _back_off(self, kept: list[int], states: list[int]) -> tuple[list[int], list[int]]:
        fsm = self.fsm
        order, sorted_bytes = fsm.vocab.sorted_order
        while kept:
            last = fsm.vocab.token_bytes[kept[-1]]
            lo = bisect_left(sorted_bytes, last)
            succ = prefix_successor(last)
            hi = len(sorted_bytes) if succ is None else bisect_left(sorted_bytes, succ)
            if lo < hi and sorted_bytes[lo] == last:
                lo += 1
            if lo >= hi:
                break
            before = states[len(kept) - 1]
            if fsm.has_row(before):  # a row at hand: one vectorized test
                row = fsm.mask_row(before)
                cand = order[lo:hi]
                if not ((row[cand >> 5] >> (cand & 31)) & 1).any():
                    break
            elif not fsm.extension_allowed(states[len(kept)], len(last), lo, hi):
                break
            kept = kept[:-1]
            states = states[: len(kept) + 1]
        return kept, states

    def _plan_greedy(self, forced: bytes) -> JumpForward | None:
        """Tokenize ``forced`` without the tokenizer: a shortest-path DP over byte offsets.

        Every token that spells ``forced[i:j]`` is allowed at offset ``i`` (the forced bytes
        are the only continuation), so the DP covers the longest coverable prefix with the
        fewest tokens; then the back-off rule applies.
        """
        fsm = self.fsm
        vocab = fsm.vocab
        order, sorted_bytes = vocab.sorted_order
        n = len(forced)
        best: list[tuple[int, int, int] | None] = [None] * (n + 1)  # (tokens, prev offset, token id)
        best[0] = (0, -1, -1)
        for i in range(n):
            if best[i] is None:
                continue
            cost = best[i][0] + 1  # type: ignore[index]
            for j in range(i + 1, min(n, i + 128) + 1):
                piece = forced[i:j]
                k = bisect_left(sorted_bytes, piece)
                if k >= len(sorted_bytes) or not sorted_bytes[k].startswith(piece):
                    break  # no token starts with this piece: longer pieces cannot match either
                if sorted_bytes[k] == piece:
                    cur = best[j]
                    if cur is None or cost < cur[0]:
                        best[j] = (cost, i, int(order[k]))
        end = max(j for j in range(n + 1) if best[j] is not None)
        if end == 0:
            return None
        kept: list[int] = []
        j = end
        while j > 0:
            _, i, t = best[j]  # type: ignore[misc]
            kept.append(t)
            j = i
        kept.reverse()
        states = [self._states[-1]]
        for t in kept:
            states.append(fsm.next_state(states[-1], t))
        kept, states = self._back_off(kept, states)
        if not kept:
            return None
        return JumpForward(rollback=0, token_ids=kept, state=states[-1])

    def tokens(self) -> list[int]:
        """Tokens advanced so far (copy)."""
        return list(self._tokens)
