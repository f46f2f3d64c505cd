"""``structgen.generate``: a Pydantic model, JSON Schema or regex plus a prompt → a validated
object, through an :class:`~structgen.engine.engine.Engine`."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence
from typing import Any

from structgen.engine.engine import Engine, EngineConfig
from structgen.engine.request import GenerateRequest, RequestError, RequestOutput, SamplingParams
from structgen.fsm import Constraint
from structgen.fsm.constraint import OutputValidationError
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError, SchemaOptions


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


def demo_model_dir() -> str:
    """Where the embedded default model's files live (``structgen/assets/demo-extractor``),
    whether or not they are there (:func:`default_model_path` checks the weights)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "demo-extractor")


def default_model_path() -> str:
    """The embedded default model folder (``structgen/assets/demo-extractor``: an
    11.75M-parameter Llama trained on synthetic extraction records, with its model card).
    Raises ``FileNotFoundError`` if the package was installed without its data files."""
    path = demo_model_dir()
    if not os.path.isfile(os.path.join(path, "model.safetensors")):
        raise FileNotFoundError(f"the embedded demo model is missing from {path}; reinstall structgen with its package data")
    return path


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
    if out.finish_reason == "length":  # cut by max_tokens, or ended early by budget completion: never a complete answer
        raise GenerationError(
            f"request {index}: max_tokens cut the output or closed it early (finish reason length, "
            f"{out.usage.completion_tokens} tokens); raise max_tokens for a complete answer (the text is attached)",
            text=out.text,
            finish_reason=out.finish_reason,
            errors=["finish reason length"],
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
    params: SamplingParams | None = None,
    schema_options: SchemaOptions | None = None,
    return_output: bool = False,
    return_exceptions: bool = False,
) -> Any:
    """Generate an object that satisfies ``model_cls`` (a Pydantic model), ``schema`` (a JSON
    Schema → a validated ``dict``/value) or ``regex`` (→ a fully matching ``str``).

    ``prompt``: text, chat messages (the tokenizer's chat template), or a *list* of those to run
    concurrently (returns a list).  A model folder that declares a prompt format
    (``structgen_prompt.json``, as the embedded demo model does) gets each text prompt for a
    schema in that format (:mod:`structgen.engine.prompt_format`).  ``engine``: an
    :class:`Engine`; else the shared engine of ``model`` (a local folder), else of the embedded
    default model.  ``params``: the :class:`SamplingParams` of every prompt (default: greedy,
    256 tokens at most, budget completion on, so the object ends valid within ``max_tokens``;
    an output that ``max_tokens`` shaped, cut or closed early, raises :class:`GenerationError`
    with finish reason ``"length"``: it is never returned as a complete answer).  With
    ``return_output`` the result is ``(value, RequestOutput)`` (usage and stats).

    A batch never loses the items that succeeded: with ``return_exceptions`` each failed item's
    exception stands in its place in the returned list; otherwise the first failed item's
    exception is raised with ``results`` attached (that same per-item list).

    Raises ``SchemaError`` / ``UnsupportedSchemaError`` / ``RegexError`` (bad constraint),
    ``RequestError`` (bad prompt or parameter), :class:`GenerationError` (no valid object: raw
    text, finish reason and validation errors attached).  Never returns an invalid object.
    """
    constraint, pyd = _constraint(model_cls, schema, regex, schema_options)
    constraint.to_ir()  # schema / regex errors surface here, before any generation
    if prompt is None:
        raise RequestError("prompt is required")
    if params is None:
        params = SamplingParams()
    elif not isinstance(params, SamplingParams):
        raise TypeError(f"params must be a structgen.SamplingParams, got {type(params).__name__}")
    batch = (
        isinstance(prompt, Sequence) and not isinstance(prompt, str) and bool(prompt) and all(isinstance(p, (str, list)) for p in prompt)
    )
    given = list(prompt) if batch else [prompt]
    eng = engine if engine is not None else get_engine(model)
    prompts = eng.prompt_format.apply(constraint, given)
    outs = eng.generate([GenerateRequest(p, params, constraint) for p in prompts])
    # the model's declared wrapping never makes a prompt fail that fits as written
    retry = [
        i for i, out in enumerate(outs) if prompts[i] is not given[i] and getattr(out.error, "code", None) == "context_length_exceeded"
    ]
    for i, out in zip(retry, eng.generate([GenerateRequest(given[i], params, constraint) for i in retry]) if retry else []):
        outs[i] = out
    results: list[Any] = []
    for i, out in enumerate(outs):
        try:
            if isinstance(out.error, (RequestError, ConstraintError, GrammarCompileError)):
                raise out.error  # input errors surface as themselves, not as GenerationError
            value = _validate(out, constraint, pyd, i)
            results.append((value, out) if return_output else value)
        except (RequestError, ConstraintError, GrammarCompileError, GenerationError) as e:
            results.append(e)
    failed = [r for r in results if isinstance(r, BaseException)]
    if not batch:
        if failed:
            raise failed[0]
        return results[0]
    if failed and not return_exceptions:
        first = failed[0]
        setattr(first, "results", results)  # noqa: B010 - any of the four exception types carries them
        raise first
    return results
