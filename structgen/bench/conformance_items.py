"""The schemas ``structgen bench conformance`` runs (JSON-Schema-Test-Suite, MaskBench), one
:class:`Item` each with its test instances, the outcome record (:class:`ItemResult`), and how an
instance is serialized in our layout (:class:`KeyOrderer`) and validated exactly
(:func:`exact_validator`)."""

from __future__ import annotations

import glob
import json
import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any


@dataclass
class Item:
    """One schema with its test instances: ``tests`` is a list of (data, valid)."""

    suite: str
    name: str
    schema: Any
    tests: list[tuple[Any, bool]]


@dataclass
class ItemResult:
    suite: str
    name: str
    outcome: str  # compiled | unsupported | error
    detail: str = ""
    passing: bool = False
    valid_total: int = 0
    valid_accepted: int = 0
    invalid_total: int = 0
    invalid_accepted: int = 0
    sample_total: int = 0
    sample_violations: int = 0
    violation_examples: list[str] = field(default_factory=list)
    first_mask_ms: float = 0.0
    cache_hit_ms: float = 0.0
    states: int = 0
    states_after: int = 0
    rows: int = 0
    rows_complete: bool = False  # every token-reachable state's row computed by the compile
    token_ns_cold: list[int] = field(default_factory=list)
    token_ns_warm: list[int] = field(default_factory=list)
    anchors: dict[str, Any] = field(default_factory=dict)  # anchor name → AnchorResult fields


def tally(res: Any, accepted: bool, valid: bool) -> bool:
    """Count one test instance on ``res`` (an :class:`ItemResult` or an anchor's result, both
    with ``valid_*`` / ``invalid_*`` counters); True when the instance was judged right."""
    if valid:
        res.valid_total += 1
        res.valid_accepted += accepted
        return accepted
    res.invalid_total += 1
    res.invalid_accepted += accepted
    return not accepted


TEST_SUITE_DRAFTS = {
    "draft2020-12": ("json-schema-test-suite", None),
    "draft7": ("json-schema-test-suite-draft7", "http://json-schema.org/draft-07/schema#"),
}


def load_test_suite(root: str) -> Iterator[Item]:
    """JSON-Schema-Test-Suite ``tests/draft2020-12/*.json`` and ``tests/draft7/*.json`` (not
    ``optional/``).  The suite leaves the draft to the runner, so draft-7 schemas without
    ``$schema`` get it (for the converter and the validator alike)."""
    for folder, (suite, uri) in TEST_SUITE_DRAFTS.items():
        for path in sorted(glob.glob(os.path.join(root, "tests", folder, "*.json"))):
            with open(path, encoding="utf-8") as f:
                groups = json.load(f)
            base = os.path.basename(path)[:-5]
            for i, g in enumerate(groups):
                tests = [(t["data"], bool(t["valid"])) for t in g["tests"]]
                schema = g["schema"]
                if uri and isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": uri, **schema}
                yield Item(suite, f"{base}#{i} {g['description']}", schema, tests)


def load_maskbench(root: str, limit: int | None = None, seed: int = 0) -> Iterator[Item]:
    """MaskBench ``data/*.json`` files (optionally a seeded sample of ``limit``)."""
    paths = sorted(glob.glob(os.path.join(root, "*.json")))
    if limit is not None and limit < len(paths):
        paths = sorted(random.Random(seed).sample(paths, limit))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        tests = [(t["data"], bool(t["valid"])) for t in d.get("tests", [])]
        yield Item("maskbench", os.path.basename(path)[:-5], d["schema"], tests)


# ----------------------------------------------------------------------------- serialization


class KeyOrderer:
    """Re-serializes an instance with object keys in the order our grammar generates them."""

    def __init__(self, root: Any) -> None:
        import jsonschema

        self.root = root
        cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
        self.validator = cls(root) if isinstance(root, (dict, bool)) else None

    def resolve(self, s: Any) -> Any:
        seen = set()
        while isinstance(s, dict) and isinstance(s.get("$ref"), str) and s["$ref"].startswith("#") and s["$ref"] not in seen:
            seen.add(s["$ref"])
            node: Any = self.root
            try:
                for tok in s["$ref"][1:].split("/")[1:]:
                    tok = tok.replace("~1", "/").replace("~0", "~")
                    node = node[int(tok)] if isinstance(node, list) else node[tok]
            except (KeyError, IndexError, ValueError, TypeError):
                return s
            rest = {k: v for k, v in s.items() if k != "$ref"}
            s = {"allOf": [node, rest]} if rest else node
        return s

    def valid(self, schema: Any, inst: Any) -> bool:
        if self.validator is None:
            return False
        try:
            return bool(self.validator.evolve(schema=schema).is_valid(inst))
        except Exception:
            return False

    def parts(self, schema: Any, inst: Any, depth: int = 0) -> list[Any]:
        """The flattened list of schemas whose property orders apply (allOf, chosen branches)."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict) or depth > 20:
            return []
        out = [schema]
        for key in ("allOf",):
            for sub in schema.get(key, []) or []:
                out.extend(self.parts(sub, inst, depth + 1))
        for key in ("anyOf", "oneOf"):
            for sub in schema.get(key, []) or []:
                if self.valid(sub, inst):
                    out.extend(self.parts(sub, inst, depth + 1))
                    break
        return out

    @staticmethod
    def member_schemas(parts: list[Any], key: str) -> list[Any]:
        """The subschemas that apply to an undeclared member ``key``: each part's
        ``patternProperties`` whose pattern matches it, else that part's ``additionalProperties``."""
        out: list[Any] = []
        for p in parts:
            hits = [sub for pat, sub in (p.get("patternProperties") or {}).items() if isinstance(sub, dict) and _search(pat, key)]
            if hits:
                out.extend(hits)
            elif isinstance(p.get("additionalProperties"), dict):
                out.append(p["additionalProperties"])
        return out

    def order(self, schema: Any, inst: Any) -> Any:
        if isinstance(inst, dict):
            parts = self.parts(schema, inst)
            # mirror the converter: siblings before allOf items, $ref target before siblings
            keys: list[str] = []
            subs: dict[str, list[Any]] = {}
            for p in parts:
                for k, v in (p.get("properties") or {}).items():
                    if k not in keys:
                        keys.append(k)
                    subs.setdefault(k, []).append(v)
            for p in parts:
                for k in p.get("required") or []:
                    if isinstance(k, str) and k not in keys:
                        keys.append(k)
            out: dict[str, Any] = {}
            for k in keys:
                if k in inst:
                    out[k] = self.order({"allOf": subs.get(k, [])}, inst[k]) if subs.get(k) else inst[k]
            for k, v in inst.items():
                if k not in out:
                    extra = self.member_schemas(parts, k)
                    out[k] = self.order({"allOf": extra}, v) if extra else v
            return out
        if isinstance(inst, list):
            parts = self.parts(schema, inst)
            prefix: list[Any] = []
            items: list[Any] = []
            for p in parts:
                if isinstance(p.get("prefixItems"), list):
                    prefix = p["prefixItems"]
                if isinstance(p.get("items"), list):  # draft 4 – 2019-09 tuples
                    prefix = p["items"]
                    if isinstance(p.get("additionalItems"), dict):
                        items.append(p["additionalItems"])
                if isinstance(p.get("items"), dict):
                    items.append(p["items"])
            return [self.order(prefix[i] if i < len(prefix) else {"allOf": items}, v) for i, v in enumerate(inst)]
        return inst


def _search(pattern: str, key: str) -> bool:
    """``re.search(pattern, key)``; False for a pattern Python's ``re`` cannot read."""
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return False


# ----------------------------------------------------------------------------- walking


def exact_validator(schema: Any) -> Any:
    """A ``jsonschema`` validator (format checking on) whose ``multipleOf`` uses exact decimal
    arithmetic, as the JSON Schema spec defines it; stock ``jsonschema`` divides floats and
    rejects e.g. 0.073 as a multiple of 0.0001 (0.073 / 0.0001 = 729.9999999999999).  It also
    takes ``Decimal`` instances (numbers parsed exactly), integral ones as integers."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)

    def multiple_of(validator: Any, m: Any, instance: Any, _schema: Any) -> Any:
        if not validator.is_type(instance, "number") or isinstance(m, bool) or not isinstance(m, (int, float)) or m <= 0:
            return
        try:
            q = Decimal(repr(instance) if isinstance(instance, float) else instance) / Decimal(repr(m) if isinstance(m, float) else m)
        except (ArithmeticError, ValueError):
            return
        if q != q.to_integral_value():
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {m!r}")

    base = cls.TYPE_CHECKER

    def integer(_checker: Any, instance: Any) -> bool:
        if isinstance(instance, Decimal):  # a number parsed exactly: integral as the draft reads 1.0
            return bool(instance.is_finite() and instance == instance.to_integral_value() and base.is_type(1.0, "integer"))
        return bool(base.is_type(instance, "integer"))

    types = base.redefine("integer", integer)
    exact = jsonschema.validators.extend(cls, {"multipleOf": multiple_of}, type_checker=types)
    return exact(schema, format_checker=cls.FORMAT_CHECKER)
