"""``$ref`` resolution: base URIs from ``$id`` (``id`` in draft 4), ``$anchor`` and plain-name
fragments, URNs and relative references, as JSON Schema defines them, through the ``referencing``
library (the resolver ``jsonschema`` itself uses).  Every reference resolves inside the schema
document; one that needs another document is refused by name (never fetched).

A ``$ref`` resolves against the base URI of the schema object that holds it: the nearest
enclosing ``$id``, not the root's (``{"$id": "http://x/a", "$defs": …, "$ref": "#/$defs/b"}``
names ``a``'s own ``$defs``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from .errors import SchemaError, UnsupportedSchemaError

_SPECS = {4: "DRAFT4", 6: "DRAFT6", 7: "DRAFT7", 2019: "DRAFT201909", 2020: "DRAFT202012"}


class RefResolver:
    """Resolves the ``$ref`` values of one root schema (built lazily, on the first ``$ref``).

    ``draft``: the root's draft number (4, 6, 7, 2019, 2020; others read as 2020-12).
    """

    def __init__(self, root: Any, draft: int) -> None:
        self.root = root
        self.draft = draft
        self._resolvers: dict[int, Any] | None = None  # id(subschema) -> resolver at its base URI
        self._pointers: dict[int, str] = {}  # id(object in root) -> its JSON pointer
        self._memo: dict[tuple[int, str], tuple[Any, str]] = {}  # (id(resolver), ref) -> result
        self._objects: dict[int, Any] = {}  # id(subschema) -> subschema

    def resolve(self, ref: Any, pointer: str, holder: Any = None) -> tuple[Any, str]:
        """The schema ``ref`` names and its JSON pointer in the root (``"#/…"``).

        ``holder``: the schema object holding the ``$ref`` (its base URI applies); without it,
        or for a schema the converter built, the base URI of the deepest object on
        ``pointer``.  Raises :class:`SchemaError` (not a string, no such pointer or anchor) or
        :class:`UnsupportedSchemaError` (a reference into another document).
        """
        import referencing.exceptions

        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", keyword="$ref", pointer=pointer)
        resolver = self._resolver_for(holder, pointer)
        got = self._memo.get((id(resolver), ref))
        if got is not None:
            return got
        try:
            target = resolver.lookup(ref).contents
        except (referencing.exceptions.PointerToNowhere, referencing.exceptions.NoSuchAnchor, referencing.exceptions.InvalidAnchor) as e:
            raise SchemaError(f"$ref {ref!r} does not resolve ({e})", keyword="$ref", pointer=pointer) from None
        except referencing.exceptions.Unresolvable:
            raise UnsupportedSchemaError(
                f"reference {ref!r} names another document, which is never fetched; only references inside the schema are supported",
                keyword="$ref",
                pointer=pointer,
            ) from None
        where = self._pointers.get(id(target)) if isinstance(target, (dict, list)) else None
        got = (target, where if where is not None else f"#{ref}")  # a boolean schema: nothing inside it refers further
        self._memo[(id(resolver), ref)] = got
        return got

    def subschemas(self) -> list[tuple[Any, str]]:
        """Every subschema of the root (as JSON Schema's applicators define them, per the
        root's draft) with its JSON pointer."""
        resolvers = self._build()
        return [(obj, self._pointers.get(key, "#")) for key, obj in self._objects.items() if key in resolvers]

    def pointer_exists(self, pointer: str) -> bool:
        """Whether JSON pointer ``pointer`` (``"#/a/b"``) names a value in the root."""
        return self._walk(pointer)[1]

    def _walk(self, pointer: str) -> tuple[list[Any], bool]:
        """The values along ``pointer`` from the root (as far as they exist), and whether all
        of it exists."""
        node = self.root
        path = [node]
        frag = unquote(pointer.lstrip("#"))
        for raw in frag.split("/")[1:] if frag else []:
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return path, False
            path.append(node)
        return path, True

    def _resolver_for(self, holder: Any, pointer: str) -> Any:
        """The resolver at ``holder``'s base URI, else at the deepest schema on ``pointer``."""
        resolvers = self._build()
        got = resolvers.get(id(holder)) if holder is not None else None
        if got is not None:
            return got
        schema_ptr = pointer[: -len("/$ref")] if pointer.endswith("/$ref") else pointer
        on_the_way = (resolvers.get(id(node)) for node in reversed(self._walk(schema_ptr)[0]))
        return next(r for r in on_the_way if r is not None)  # the root always has one

    def _build(self) -> dict[int, Any]:
        if self._resolvers is not None:
            return self._resolvers
        import referencing
        import referencing.jsonschema

        spec = _schemas_only(getattr(referencing.jsonschema, _SPECS.get(self.draft, "DRAFT202012")))
        root_resource = spec.create_resource(self.root)
        base = root_resource.id() or ""
        registry = referencing.Registry().with_resource(base, root_resource).crawl()
        resolvers: dict[int, Any] = {}
        stack = [(root_resource, registry.resolver(base_uri=base))]
        while stack:
            resource, resolver = stack.pop()
            if id(resource.contents) in resolvers:
                continue
            resolvers[id(resource.contents)] = resolver
            self._objects[id(resource.contents)] = resource.contents
            for sub in resource.subresources():
                stack.append((sub, resolver.in_subresource(sub)))
        self._index_pointers(self.root, "#")
        self._resolvers = resolvers
        return resolvers

    def _index_pointers(self, root: Any, start: str) -> None:
        stack = [(root, start)]
        while stack:
            node, ptr = stack.pop()
            if id(node) in self._pointers:
                continue
            self._pointers[id(node)] = ptr
            if isinstance(node, dict):
                for k, v in node.items():
                    if isinstance(v, (dict, list)):
                        stack.append((v, f"{ptr}/{str(k).replace('~', '~0').replace('/', '~1')}"))
            elif isinstance(node, list):
                stack.extend((v, f"{ptr}/{i}") for i, v in enumerate(node) if isinstance(v, (dict, list)))


def _schemas_only(spec: Any) -> Any:
    """``spec`` with subresources limited to schemas (objects and booleans).

    ``referencing`` (0.37) yields every value of a draft 4–7 ``dependencies`` once its first
    value is a schema, so a mix of schema and property-list dependencies
    (``{"a": {…}, "b": ["c"]}``) would hand it a list as a schema.
    """
    from collections.abc import Mapping

    import referencing

    def subresources_of(contents: Any) -> Any:
        return (sub for sub in spec.subresources_of(contents) if isinstance(sub, (Mapping, bool)))

    make: Any = referencing.Specification  # an attrs class: mypy does not see its fields
    return make(
        name=spec.name,
        id_of=spec.id_of,
        subresources_of=subresources_of,
        anchors_in=lambda _spec, contents: spec.anchors_in(contents),
        maybe_in_subresource=spec.maybe_in_subresource,
    )
