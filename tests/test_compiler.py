from __future__ import annotations

import gc
import json
import threading
import traceback
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from structgen.fsm.compile_process import WARM_UP, process_config
from structgen.fsm.compiler import GrammarCompiler
from structgen.fsm.compiler_config import CompilerConfig, GcPause
from structgen.fsm.constraint import Constraint
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.fsm.vocab import Vocabulary
from structgen.schemas.errors import RegexError, SchemaError, UnsupportedSchemaError
from structgen.schemas.schema_options import SchemaOptions

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 4}}, "required": ["a"]}


def test_memory_cache_hit_returns_same_fsm(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab)
    f1 = c.compile(Constraint.json_schema(SCHEMA))
    f2 = c.compile(Constraint.json_schema(SCHEMA))
    assert f1 is f2
    s = c.stats()
    assert (s.misses, s.memory_hits) == (1, 1)


def test_options_are_part_of_the_key(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab)
    a = c.compile(Constraint.json_schema(SCHEMA))
    b = c.compile(Constraint.json_schema(SCHEMA, SchemaOptions(whitespace="compact")))
    assert a is not b and c.stats().misses == 2


def test_failures_are_cached(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab)
    bad = Constraint.json_schema({"type": "array", "uniqueItems": True})
    with pytest.raises(UnsupportedSchemaError) as e1:
        c.compile(bad)
    with pytest.raises(UnsupportedSchemaError) as e2:
        c.compile(bad)
    assert e1.value is e2.value
    s = c.stats()
    assert (s.misses, s.failures, s.memory_hits) == (1, 1, 1)


def test_regex_error_propagates(tiny_vocab: Vocabulary) -> None:
    with pytest.raises(RegexError) as ei:
        GrammarCompiler(tiny_vocab).compile(Constraint.regex("ab(?<=cd|e)"))
    assert ei.value.position == 2


def test_disk_cache(tiny_vocab: Vocabulary, tmp_path: object) -> None:
    cfg = CompilerConfig(cache_dir=str(tmp_path))
    f1 = GrammarCompiler(tiny_vocab, cfg).compile(Constraint.json_schema(SCHEMA))
    c2 = GrammarCompiler(tiny_vocab, cfg)
    f2 = c2.compile(Constraint.json_schema(SCHEMA))
    assert c2.stats().disk_hits == 1
    assert (f2.mask_row(f2.initial) == f1.mask_row(f1.initial)).all()


def test_the_disk_cache_never_loads_what_other_code_wrote(tiny_vocab: Vocabulary, tmp_path: Path) -> None:
    """Entries live under the digest of the compiler's code: one written by another version
    (here: the same file under another digest's folder) is not read."""
    from structgen.fsm.compiler import code_digest

    cfg = CompilerConfig(cache_dir=str(tmp_path))
    GrammarCompiler(tiny_vocab, cfg).compile(Constraint.json_schema(SCHEMA))
    (written,) = [p for p in tmp_path.rglob("*.pkl")]
    assert written.relative_to(tmp_path).parts[0] == code_digest() and len(code_digest()) == 16
    other = tmp_path / "0123456789abcdef" / written.parent.name
    other.mkdir(parents=True)
    written.rename(other / written.name)
    c2 = GrammarCompiler(tiny_vocab, cfg)
    c2.compile(Constraint.json_schema(SCHEMA))
    assert c2.stats().disk_hits == 0


def test_state_cap_names_the_limit(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab, CompilerConfig(max_states=40))
    fsm = c.compile(Constraint.regex("[ab]{0,60}1"))  # lazy: only the start is built here
    with pytest.raises(GrammarCompileError, match="max_states=40"):
        fsm.materialize()  # discovering more than 40 states while serving raises too


@pytest.mark.parametrize(
    "schema,pointer",
    [
        (
            {"type": "object", "properties": {"c": {"properties": {"e": {"type": "string", "format": "email", "pattern": "^.{0,900}$"}}}}},
            "#/properties/c/properties/e",
        ),
        (
            {"type": "array", "items": {"allOf": [{"type": "string", "pattern": "^(?:[a-z]+[0-9]){0,60}$"}, {"pattern": "^.{0,400}$"}]}},
            "#/items",
        ),
    ],
)
def test_a_product_past_the_state_cap_names_its_subschema(tiny_vocab: Vocabulary, schema: dict[str, object], pointer: str) -> None:
    c = GrammarCompiler(tiny_vocab, CompilerConfig(max_states=2000))
    with pytest.raises(GrammarCompileError, match="max_states=2000") as info:
        c.compile(Constraint.json_schema(schema))
    assert str(info.value).endswith(f"of the subschema at {pointer}")
    assert info.value.product is None  # the IR does not travel with the error


def test_timeout_names_the_limit(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab, CompilerConfig(timeout_s=0.05))
    heavy = {"type": "string", "pattern": "^(?:[a-z]+[0-9]){0,60}$", "allOf": [{"pattern": "^.{0,400}$"}]}
    with pytest.raises(GrammarTimeoutError, match=r"timeout_s=0\.05"):
        c.compile(Constraint.json_schema(heavy))


def test_empty_language_is_an_error(tiny_vocab: Vocabulary) -> None:
    with pytest.raises(GrammarCompileError, match="empty language"):
        GrammarCompiler(tiny_vocab).compile(Constraint.json_schema({"type": "integer", "minimum": 5, "maximum": 1}))


def test_submit_runs_off_thread_and_shares_futures(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab, CompilerConfig(workers=2))
    main = threading.get_ident()
    seen: list[int] = []
    con = Constraint.regex("[ab]{1,8}")
    orig = c._compile_uncached

    def spy(constraint: Constraint):  # type: ignore[no-untyped-def]
        seen.append(threading.get_ident())
        return orig(constraint)

    c._compile_uncached = spy  # type: ignore[method-assign]
    futs = [c.submit(con) for _ in range(4)]
    fsms = {id(f.result(timeout=30)) for f in futs}
    assert len(fsms) == 1 and seen and all(t != main for t in seen)
    c.close()


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        CompilerConfig(timeout_s=0)
    with pytest.raises(ValueError):
        CompilerConfig(max_states=1)
    with pytest.raises(ValueError):
        Constraint("grammar", "x")
    with pytest.raises(ValueError):
        SchemaOptions(whitespace="loose")
    with pytest.raises(ValueError, match="precompute_states"):
        CompilerConfig(precompute_states=-1)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="precompute_budget_s"):
            CompilerConfig(precompute_budget_s=bad)
    for bad_flag in ("no", 0, None):
        with pytest.raises(ValueError, match="pause_gc must be a bool"):
            CompilerConfig(pause_gc=bad_flag)  # type: ignore[arg-type]


def test_precompute_states_makes_rows_eager(tiny_vocab: Vocabulary) -> None:
    c = Constraint.regex(r'"[abé]{0,4}"')
    lazy = GrammarCompiler(tiny_vocab).compile(c)
    eager = GrammarCompiler(tiny_vocab, CompilerConfig(precompute_states=10_000)).compile(c)
    assert eager.rows_complete and not lazy.rows_complete and eager.num_rows > lazy.num_rows == 1
    capped = GrammarCompiler(tiny_vocab, CompilerConfig(precompute_states=2)).compile(c)
    assert not capped.rows_complete and capped.num_rows <= 2


def test_precompute_budget_stops_eager_rows_and_the_rest_stay_lazy(tiny_vocab: Vocabulary) -> None:
    """A spent ``precompute_budget_s`` stops the eager rows (the compile still returns its
    FSM, with the initial row); rows past it are computed on first visit and equal the eager
    ones."""
    c = Constraint.regex(r'"[abé]{0,4}"')
    eager = GrammarCompiler(tiny_vocab, CompilerConfig(precompute_states=10_000, precompute_budget_s=60.0)).compile(c)
    assert eager.rows_complete
    cut = GrammarCompiler(tiny_vocab, CompilerConfig(precompute_states=10_000, precompute_budget_s=1e-9)).compile(c)
    assert not cut.rows_complete and cut.num_rows == 1
    stack, seen = [(eager.initial, cut.initial)], set()
    while stack:  # every token-reachable state, in lockstep (state ids agree: same construction)
        a, b = stack.pop()
        if a in seen:
            continue
        seen.add(a)
        assert np.array_equal(eager.mask_row(a), cut.mask_row(b))
        for t in eager.allowed_token_ids(a).tolist():
            if t not in tiny_vocab.eos_token_ids:
                stack.append((eager.next_state(a, t), cut.next_state(b, t)))
    assert cut.rows_complete is False and cut.num_rows == eager.num_rows and len(seen) > 5


def test_eager_compiler_completes_a_lazy_disk_entry(tiny_vocab: Vocabulary, tmp_path: object) -> None:
    c = Constraint.regex(r'"[abé]{0,4}"')
    GrammarCompiler(tiny_vocab, CompilerConfig(cache_dir=str(tmp_path))).compile(c)  # stored lazy
    eager = GrammarCompiler(tiny_vocab, CompilerConfig(cache_dir=str(tmp_path), precompute_states=10_000))
    fsm = eager.compile(c)
    assert fsm.rows_complete and eager.stats().disk_hits == 1 and eager.stats().misses == 0


def test_precompile_in_worker_processes(tiny_vocab: Vocabulary, tmp_path: object) -> None:
    """Worker processes compile, the parent caches (refusals too, with their pointer) and
    writes the disk cache; a later compile() is a memory hit returning the eager FSM."""
    good = [Constraint.regex(r"[ab]{1,3}"), Constraint.json_schema({"type": "boolean"})]
    bad = Constraint.json_schema({"type": "object", "maxProperties": "x"})
    comp = GrammarCompiler(tiny_vocab, CompilerConfig(precompute_states=1000, cache_dir=str(tmp_path)))
    out = comp.precompile([*good, good[0], bad], processes=2)
    assert set(out) == {c.key for c in [*good, bad]}
    err = out[bad.key]
    assert isinstance(err, SchemaError) and err.keyword == "maxProperties" and err.pointer == "#"
    for c in good:
        fsm = comp.compile(c)
        assert fsm is out[c.key] and fsm.rows_complete and fsm.vocab is tiny_vocab
    with pytest.raises(SchemaError):
        comp.compile(bad)
    assert comp.stats().misses == 3 and comp.stats().failures == 1 and comp.stats().memory_hits == 3
    disk = GrammarCompiler(tiny_vocab, CompilerConfig(cache_dir=str(tmp_path))).compile(good[0])
    assert disk.rows_complete
    with pytest.raises(ValueError, match="processes"):
        comp.precompile(good, processes=0)


def _spell(fsm: object, text: bytes) -> list[int]:
    """Token ids spelling ``text`` that ``fsm`` allows one after another (depth-first)."""

    def dfs(state: int, pos: int) -> list[int] | None:
        if pos == len(text):
            return []
        for t in fsm.allowed_token_ids(state).tolist():  # type: ignore[attr-defined]
            piece = fsm.vocab.token_bytes[t]  # type: ignore[attr-defined]
            if piece and text.startswith(piece, pos):
                rest = dfs(fsm.next_state(state, t), pos + len(piece))  # type: ignore[attr-defined]
                if rest is not None:
                    return [t, *rest]
        return None

    got = dfs(fsm.initial, 0)  # type: ignore[attr-defined]
    assert got is not None, f"no token path spells {text!r}"
    return got


def test_submit_on_worker_processes(tiny_vocab: Vocabulary) -> None:
    """With ``processes``, submit() compiles in spawned workers: the FSM comes back on the
    parent's vocabulary with the same rows and transitions as an in-process compile, refusals
    arrive as the same named errors, and a second submit is a cache hit already done."""
    good = Constraint.json_schema(SCHEMA)
    bad = Constraint.json_schema({"type": "object", "maxProperties": "x"})
    comp = GrammarCompiler(tiny_vocab, CompilerConfig(processes=2, precompute_states=10_000))
    try:
        comp.start_workers()
        fut_good, fut_bad = comp.submit(good), comp.submit(bad)
        fsm = fut_good.result(timeout=120)
        with pytest.raises(SchemaError) as err:
            fut_bad.result(timeout=120)
        assert err.value.keyword == "maxProperties"
        again = comp.submit(good)
        assert again.done() and again.result() is fsm
        assert comp.stats().misses == 2 and comp.stats().failures == 1 and comp.stats().memory_hits == 1
    finally:
        comp.close()
    local = GrammarCompiler(tiny_vocab, CompilerConfig(precompute_states=10_000)).compile(good)
    assert fsm.vocab is tiny_vocab and fsm.rows_complete and local.rows_complete
    assert np.array_equal(fsm.mask_row(fsm.initial), local.mask_row(local.initial))
    text = b'{"a": 12, "b": "ab"}'
    cur_p, cur_l = fsm.cursor(), local.cursor()
    for tok in _spell(fsm, text):
        cur_p.advance(tok)
        cur_l.advance(tok)
        assert np.array_equal(fsm.mask_row(cur_p.state), local.mask_row(cur_l.state))
    assert cur_p.is_accepting() and cur_l.is_accepting()
    assert fsm.dfa.accepts(text) and local.dfa.accepts(text)
    with pytest.raises(ValueError, match="processes"):
        CompilerConfig(processes=-1)


def test_put_seeds_the_cache_and_checks_the_vocabulary(tiny_vocab: Vocabulary, gpt2_vocab: Vocabulary) -> None:
    c = Constraint.regex(r"[ab]{1,3}")
    fsm = GrammarCompiler(tiny_vocab).compile(c)
    comp = GrammarCompiler(tiny_vocab)
    comp.put(c, fsm)
    assert comp.compile(c) is fsm and comp.stats().misses == 0
    with pytest.raises(ValueError, match="vocabulary"):
        GrammarCompiler(gpt2_vocab).put(c, fsm)


def test_post_validation_for_non_strict_constraints(tiny_vocab: Vocabulary) -> None:
    from structgen.fsm import OutputValidationError

    con = Constraint.json_schema({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, SchemaOptions(strict=False))
    fsm = GrammarCompiler(tiny_vocab).compile(con)  # compiles: uniqueItems dropped from the grammar ...
    assert fsm.dfa.accepts(b"[1, 1]")
    assert con.validate("[1, 2]") == [1, 2]
    with pytest.raises(OutputValidationError, match="non-unique"):  # ... and enforced afterwards
        con.validate("[1, 1]")
    with pytest.raises(OutputValidationError, match="not JSON"):
        con.validate("[1,")
    with pytest.raises(OutputValidationError, match="regex"):
        Constraint.regex("a+").validate("b")


def test_gc_pause_is_reference_counted_and_restores_the_collector() -> None:
    """Nested and concurrent pauses keep the collector off until the last one ends; a
    collector that was off before stays off."""
    pause = GcPause()
    was = gc.isenabled()
    try:
        gc.enable()
        with pause.paused():
            assert not gc.isenabled()
            with pause.paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause still runs
            inside = threading.Event()
            release = threading.Event()

            def other() -> None:
                with pause.paused():
                    inside.set()
                    release.wait(5)

            t = threading.Thread(target=other)
            t.start()
            assert inside.wait(5)
        assert not gc.isenabled()  # the other thread's pause outlives this one
        release.set()
        t.join(5)
        assert gc.isenabled()
        gc.disable()
        with pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: left off
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("pause_gc", [True, False])
def test_compile_pauses_the_collector_only_when_configured(tiny_vocab: Vocabulary, pause_gc: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    compiler = GrammarCompiler(tiny_vocab, CompilerConfig(pause_gc=pause_gc))
    real = compiler._compile_now

    def spy(constraint: Constraint) -> object:
        seen.append(gc.isenabled())
        return real(constraint)

    monkeypatch.setattr(compiler, "_compile_now", spy)
    assert gc.isenabled()
    compiler.compile(Constraint.regex("ab+"))
    assert seen == [not pause_gc]
    assert gc.isenabled()
    with pytest.raises(GrammarCompileError, match="empty language"):  # a failing compile restores it too
        compiler.compile(Constraint.json_schema({"type": "integer", "minimum": 5, "maximum": 1}))
    assert gc.isenabled()


def test_the_compile_processes_warm_up_schema_compiles(gpt2_vocab: Vocabulary) -> None:
    """Every compile process compiles WARM_UP at start-up (a failure there would take the pool
    down): it compiles, and its language is not empty."""
    fsm = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0)).compile(WARM_UP)
    assert fsm.dfa.accepts(b"{}") and not fsm.dfa.accepts(b'{"a": 1}')


def test_cached_failures_keep_nothing_of_the_failed_compile(gpt2_vocab: Vocabulary) -> None:
    """A failure in the LRU is raised again without the frames of the compile that failed
    (they held its partial automaton) and without a traceback grown by earlier raises."""
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(max_states=50))
    c = Constraint.json_schema({"type": "string", "pattern": "^(a|b)*a(a|b){8}$", "maxLength": 30})  # an eager product
    for _ in range(3):  # the compile, then two cache hits
        with pytest.raises(GrammarCompileError, match="max_states=50") as info:
            compiler.compile(c)
        frames = [f.f_code.co_name for f, _line in traceback.walk_tb(info.value.__traceback__)]
        assert frames == ["test_cached_failures_keep_nothing_of_the_failed_compile", "compile"], frames
        assert info.value.__context__ is None and info.value.__cause__ is None


@pytest.mark.parametrize("cache_size", [0, 1])
def test_a_failed_compile_leaves_no_reference_cycle(gpt2_vocab: Vocabulary, cache_size: int) -> None:
    """The failure raised by a compile (and by each cache hit after it) is freed by reference
    counting once nothing holds it (its handler is done, the LRU evicted it): nothing for the
    cyclic collector, which the engine freezes (a cycle there is kept for the life of the
    process)."""
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(max_states=50, cache_size=cache_size))
    c = Constraint.json_schema({"type": "string", "pattern": "^(a|b)*a(a|b){8}$", "maxLength": 30})
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):  # the compile, then two cache hits when there is a cache
            try:
                compiler.compile(c)
            except GrammarCompileError:
                pass
            else:
                pytest.fail("the compile should meet max_states")
        compiler.compile(Constraint.regex("[ab]{3}"))  # evicts the failure from a cache of one
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_compile_processes_keep_no_grammars() -> None:
    """A compile process ships each grammar and keeps none (its owner caches them): no LRU,
    one thread, no processes of its own; the limits are the owner's."""
    owner = CompilerConfig(processes=4, row_processes=3, workers=8, cache_size=512, max_states=1234)
    got = process_config(owner)
    assert (got.cache_size, got.workers, got.processes, got.row_processes) == (0, 1, 0, 0)
    assert got.max_states == 1234 and got.timeout_s == owner.timeout_s


def test_evict_drops_only_the_grammar_the_constraint_maps_to(tiny_vocab: Vocabulary) -> None:
    c = GrammarCompiler(tiny_vocab, CompilerConfig())
    constraint = Constraint.regex("[ab]{0,9}1")
    first = c.compile(constraint)
    other = GrammarCompiler(tiny_vocab, CompilerConfig()).compile(constraint)  # equal, not the cached one
    assert not c.evict(constraint, other) and c.compile(constraint) is first
    assert c.evict(constraint, first)
    assert not c.evict(constraint, first)  # already gone
    assert c.compile(constraint) is not first  # compiled anew


def test_unconstrained_values_nest_any_value_depth_levels(gpt2_vocab: Vocabulary) -> None:
    """``{}`` takes values nested up to ``any_value_depth`` (6 by default) levels deep."""
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0))
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    for options, deepest in ((SchemaOptions(), 6), (SchemaOptions(any_value_depth=3), 3)):
        fsm = compiler.compile(Constraint.json_schema(schema, options))
        nested = [fsm.dfa.accepts(('{"a": ' + "[" * k + "1" + "]" * k + "}").encode()) for k in range(1, 9)]
        assert nested == [k <= deepest for k in range(1, 9)]


def test_values_inside_an_eager_product_nest_product_value_depth_levels(gpt2_vocab: Vocabulary) -> None:
    """Where the object's members feed a product (here ``minProperties`` 2 with undeclared
    members: the layout intersected with a member count), ``{}`` nests ``product_value_depth``
    (3) levels deep, else ``any_value_depth`` (6); every string accepted validates."""
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0))
    free = {"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": {"type": "integer"}}
    for extra, deepest in (({}, 6), ({"minProperties": 2}, 3)):
        schema = {**free, **extra}
        fsm = compiler.compile(Constraint.json_schema(schema))
        texts = [('{"a": ' + "[" * k + "1" + "]" * k + ', "b": 2}') for k in range(1, 9)]
        assert [fsm.dfa.accepts(t.encode()) for t in texts] == [k <= deepest for k in range(1, 9)], extra
        assert all(jsonschema.validate(json.loads(t), schema) is None for t in texts)
    for name in ("max_recursion_depth", "any_value_depth", "product_value_depth"):
        for bad in (-1, "3", True, 2.0):
            with pytest.raises(ValueError, match=f"{name} must be an int >= 0, got {bad!r}"):
                SchemaOptions(**{name: bad})


def test_a_state_cap_at_a_deeper_setting_compiles_again_shallower(gpt2_vocab: Vocabulary) -> None:
    """Where unconstrained values five levels deep make an automaton pass the state cap, the
    compile tries again with them three levels deep (``any_value_fallback_depth``); without a
    fallback the cap is the error, named."""
    schema = {"allOf": [{"type": "array", "items": {}}, {"not": {"type": "array", "items": {"type": "integer"}}}]}
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0, max_states=12800))
    fsm = compiler.compile(Constraint.json_schema(schema, SchemaOptions(any_value_depth=5)))
    assert fsm.dfa.accepts(b'[[[["x"]]]]') and not fsm.dfa.accepts(b"[1, 2]")
    assert not fsm.dfa.accepts(b'[[[[["x"]]]]]')  # four levels inside the array: past the fallback's three
    with pytest.raises(GrammarCompileError, match="max_states=12800"):
        compiler.compile(Constraint.json_schema(schema, SchemaOptions(any_value_depth=5, any_value_fallback_depth=None)))
    assert Constraint.json_schema(schema, SchemaOptions(any_value_depth=3)).shallower() is None  # nothing lower to try
    assert Constraint.regex("a+").shallower() is None
    for bad in (-1, "3", True):
        with pytest.raises(ValueError, match=f"any_value_fallback_depth must be None or an int >= 0, got {bad!r}"):
            SchemaOptions(any_value_fallback_depth=bad)  # type: ignore[arg-type]
