"""``structgen.generate``: a Pydantic model, JSON Schema or regex plus a prompt → a validated
object, through an :class:`~structgen.engine.Engine`."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence
from typing import Any

from structgen.fsm import Constraint
from structgen.fsm.compiler import OutputValidationError
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError, SchemaOptions

from .demo.prompting import format_prompt
from .engine import Engine, EngineConfig
from .request import GenerateRequest, RequestError, RequestOutput, SamplingParams


class GenerationError(RuntimeError):
    """Generation ended without a valid object.

    Attributes: ``text`` (raw output), ``finish_reason``, ``errors`` (validation messages or the
    engine error), ``output`` (the :class:`RequestOutput`), ``index`` (position in a batch).
    """

    def __init__(
        self, message: str, *, text: str, finish_reason: str, errors: list[str], output: RequestOutput | None = None, index: int = 0
    ) -> None:
        super().__init__(message)
        self.text = text
        self.finish_reason = finish_reason
        self.errors = errors
        self.output = output
        self.index = index


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def default_model_path() -> str:
    """The embedded default model folder (see :mod:`structgen.default_model`)."""
    from .default_model import ensure_default_model

    return os.fspath(ensure_default_model())


def uses_extraction_prompt(model_path: str | os.PathLike[str]) -> bool:
    """True for a model folder trained on structgen's extraction prompt (``structgen_prompt.json``)."""
    return os.path.isfile(os.path.join(os.fspath(model_path), "structgen_prompt.json"))


def extraction_prompts(constraint: Constraint | None, prompts: list[Any]) -> list[Any]:
    """``prompts`` for a model trained on structgen's extraction prompt: each text prompt wrapped
    in it (the schema's field list, then the text) when ``constraint`` is a JSON Schema object;
    chat messages, regexes and free text are left as they are."""
    if constraint is None or constraint.kind != "json_schema":
        return prompts
    schema = constraint.schema()
    if not isinstance(schema, dict):
        return prompts
    return [format_prompt(schema, p) if isinstance(p, str) else p for p in prompts]


def get_engine(model: str | os.PathLike[str] | None = None, config: EngineConfig | None = None) -> Engine:
    """A shared engine per model folder (created on first use, closed at exit)."""
    path = os.path.realpath(os.fspath(model)) if model is not None else default_model_path()
    with _engines_lock:
        eng = _engines.get(path)
        if eng is None:
            eng = Engine(path, config)
            _engines[path] = eng
        return eng


@atexit.register
def _close_engines() -> None:
    for eng in _engines.values():
        eng.close()
    _engines.clear()


def _constraint(model: Any, schema: Any, regex: str | None, options: SchemaOptions | None) -> tuple[Constraint, Any]:
    given = [x is not None for x in (model, schema, regex)]
    if sum(given) != 1:
        raise TypeError("pass exactly one of: a Pydantic model class, schema=, regex=")
    if model is not None:
        from pydantic import BaseModel

        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"the first argument must be a pydantic.BaseModel subclass, got {model!r}")
        return Constraint.pydantic(model, options), model
    if schema is not None:
        return Constraint.json_schema(schema, options), None
    assert regex is not None
    return Constraint.regex(regex), None


def _validate(out: RequestOutput, constraint: Constraint, model: Any, index: int) -> Any:
    """The validated value of ``out`` or :class:`GenerationError`."""
    if out.finish_reason in ("error", "abort"):
        raise GenerationError(
            f"request {index} failed: {out.error}",
            text=out.text,
            finish_reason=out.finish_reason,
            errors=[str(out.error)],
            output=out,
            index=index,
        )
    try:
        value = constraint.validate(out.text)  # regex fullmatch, or JSON parse + jsonschema
        return model.model_validate(value) if model is not None else value
    except (OutputValidationError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        errors = [str(e) for e in exc.errors()] if hasattr(exc, "errors") else [str(exc)]
        raise GenerationError(
            f"request {index}: no valid output (finish reason {out.finish_reason}): {errors[0]}",
            text=out.text,
            finish_reason=out.finish_reason,
            errors=errors,
            output=out,
            index=index,
        ) from None


def generate(
    model_cls: Any = None,
    prompt: Any = None,
    *,
    schema: dict[str, Any] | str | None = None,
    regex: str | None = None,
    engine: Engine | None = None,
    model: str | os.PathLike[str] | None = None,
    max_tokens: int = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    jump_forward: bool | None = None,
    budget_completion: bool = True,
    schema_options: SchemaOptions | None = None,
    return_output: bool = False,
) -> Any:
    """Generate an object that satisfies ``model_cls`` (a Pydantic model), ``schema`` (a JSON
    Schema → a validated ``dict``/value) or ``regex`` (→ a fully matching ``str``).

    ``prompt``: text, chat messages (the tokenizer's chat template), or a *list* of those to run
    concurrently (returns a list).  With a model trained on structgen's extraction prompt (the
    embedded demo model: its folder has ``structgen_prompt.json``), a text prompt for a schema is
    wrapped in that prompt (the schema's field list, then the text).  ``engine``: an :class:`Engine`; else the shared engine of
    ``model`` (a local folder), else of the embedded default model.  ``budget_completion``
    (default on) steers the last tokens so the object is complete within ``max_tokens``
    (:class:`SamplingParams`).  With ``return_output`` the
    result is ``(value, RequestOutput)`` (usage and stats).

    Raises ``SchemaError`` / ``UnsupportedSchemaError`` / ``RegexError`` (bad constraint),
    ``RequestError`` (bad prompt or parameter), :class:`GenerationError` (no valid object: raw
    text, finish reason and validation errors attached).  Never returns an invalid object.
    """
    constraint, pyd = _constraint(model_cls, schema, regex, schema_options)
    constraint.to_ir()  # schema / regex errors surface here, before any generation
    if prompt is None:
        raise RequestError("prompt is required")
    params = SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        jump_forward=jump_forward,
        budget_completion=budget_completion,
    )
    batch = (
        isinstance(prompt, Sequence) and not isinstance(prompt, str) and bool(prompt) and all(isinstance(p, (str, list)) for p in prompt)
    )
    prompts = list(prompt) if batch else [prompt]
    eng = engine if engine is not None else get_engine(model)
    if uses_extraction_prompt(eng.model_path):
        prompts = extraction_prompts(constraint, prompts)
    outs = eng.generate([GenerateRequest(p, params, constraint) for p in prompts])
    for out in outs:  # input errors surface as themselves, not as GenerationError
        if isinstance(out.error, (RequestError, ConstraintError, GrammarCompileError)):
            raise out.error
    values = [_validate(o, constraint, pyd, i) for i, o in enumerate(outs)]
    if return_output:
        pairs = list(zip(values, outs))
        return pairs if batch else pairs[0]
    return values if batch else values[0]
