"""``$ref`` resolution: base URIs from ``$id`` (``id`` in draft 4), ``$anchor`` and plain-name
fragments, URNs and relative references, as JSON Schema defines them, through the ``referencing``
library (the resolver ``jsonschema`` itself uses).  Every reference resolves inside the schema
document; one that needs another document is refused by name (never fetched).

A ``$ref`` resolves against the base URI of the schema object that holds it: the nearest
enclosing ``$id``, not the root's (``{"$id": "http://x/a", "$defs": …, "$ref": "#/$defs/b"}``
names ``a``'s own ``$defs``).

A ``$dynamicRef`` (2020-12) whose initial target is a ``$dynamicAnchor`` resolves to the
outermost schema resource of the dynamic scope that defines a ``$dynamicAnchor`` of the same
name (JSON Schema 2020-12 Core, section 8.2.3.2). Otherwise it behaves as ``$ref``. The dynamic
scope is the one ``referencing`` (the resolver ``jsonschema`` validates with) keeps: following a
reference adds the base URI current there (when it is not empty, and the scope is empty or the
reference leaves that resource); entering an embedded resource without a reference adds nothing
(:func:`followed_scope`).

A ``$recursiveRef`` (2019-09; its value is ``"#"``) names its own schema resource; where that
resource has ``"$recursiveAnchor": true``, the outermost of the resources around it in the
dynamic scope that all have one (JSON Schema 2019-09 Core, section 8.2.4.2; ``referencing``'s
``lookup_recursive_ref``, walking outward from the innermost and stopping at the first without).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag, urljoin

from .errors import SchemaError, UnsupportedSchemaError
from .json_keywords import ANNOTATIONS, RecursionLimit

if TYPE_CHECKING:
    from .ir import Node
    from .json_schema import Converter

_SPECS = {4: "DRAFT4", 6: "DRAFT6", 7: "DRAFT7", 2019: "DRAFT201909", 2020: "DRAFT202012"}


_BASE_KEYS = ("$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor")  # keywords that set a base URI or name an anchor


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
        self._bases: dict[int, str] = {}  # id(subschema) -> its base URI
        self._registry: Any = None
        self._plain: bool | None = None  # _plain_document, once scanned

    def resolve(self, ref: Any, pointer: str, holder: Any = None, keyword: str = "$ref") -> tuple[Any, str]:
        """The schema ``ref`` names and its JSON pointer in the root (``"#/…"``).

        ``holder``: the schema object holding the ``$ref`` (its base URI applies); without it,
        or for a schema the converter built, the base URI of the deepest object on
        ``pointer``.  Raises :class:`SchemaError` (not a string, no such pointer or anchor) or
        :class:`UnsupportedSchemaError` (a reference into another document), both naming
        ``keyword``.
        """
        import referencing.exceptions

        if not isinstance(ref, str):
            raise SchemaError(f"{keyword} must be a string", keyword=keyword, pointer=pointer)
        if (ref == "#" or ref.startswith("#/")) and self._plain_document():
            path, found = self._walk(ref)  # no base URI or anchor anywhere: a JSON pointer into the root
            if found:
                if not self._pointers:
                    self._index_pointers(self.root, "#")
                return path[-1], self._where(path[-1], ref)
        resolver = self._resolver_for(holder, pointer)
        got = self._memo.get((id(resolver), ref))
        if got is not None:
            return got
        try:
            target = resolver.lookup(ref).contents
        except (referencing.exceptions.PointerToNowhere, referencing.exceptions.NoSuchAnchor, referencing.exceptions.InvalidAnchor) as e:
            raise SchemaError(f"{keyword} {ref!r} does not resolve ({e})", keyword=keyword, pointer=pointer) from None
        except referencing.exceptions.Unresolvable:
            raise UnsupportedSchemaError(
                f"reference {ref!r} names another document, which is never fetched; only references inside the schema are supported",
                keyword=keyword,
                pointer=pointer,
            ) from None
        got = (target, self._where(target, ref))
        self._memo[(id(resolver), ref)] = got
        return got

    def _plain_document(self) -> bool:
        """Whether no object in the root sets a base URI or an anchor (``$id``, ``id`` with a
        string value, ``$anchor``, ``$dynamicAnchor``, ``$recursiveAnchor``), so that every
        ``#/…`` reference names the value at that JSON pointer of the root, as ``referencing``
        would resolve it, without crawling the document's resources.  A property or value that
        merely spells one of those names only sends references the general way."""
        if self._plain is None:
            self._plain = True
            stack = [self.root]
            while stack and self._plain:
                node = stack.pop()
                if isinstance(node, dict):
                    if any(k in node for k in _BASE_KEYS) or isinstance(node.get("id"), str):
                        self._plain = False
                    stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
                elif isinstance(node, list):
                    stack.extend(v for v in node if isinstance(v, (dict, list)))
        return self._plain

    def _where(self, target: Any, ref: str) -> str:
        where = self._pointers.get(id(target)) if isinstance(target, (dict, list)) else None
        return where if where is not None else f"#{ref}"  # a boolean schema: nothing inside it refers further

    def base_of(self, schema: Any) -> str | None:
        """The base URI of ``schema`` (a subschema of the root), or None for an object the
        root does not hold (one the converter built)."""
        self._build()
        return self._bases.get(id(schema))

    def resolve_dynamic(self, ref: Any, pointer: str, holder: Any, scope: tuple[str, ...]) -> tuple[Any, str]:
        """The schema a ``$dynamicRef`` of ``holder`` names, and its pointer: where its initial
        target is a ``$dynamicAnchor``, the same-named dynamic anchor of the first resource of
        ``scope`` (base URIs, outermost first) that defines one, else as :meth:`resolve`.
        Raises as :meth:`resolve`, naming ``$dynamicRef``."""
        import referencing.exceptions
        import referencing.jsonschema

        if not isinstance(ref, str):
            raise SchemaError("$dynamicRef must be a string", keyword="$dynamicRef", pointer=pointer)
        self._build()
        uri, fragment = urldefrag(urljoin(self.base_for(holder, pointer), ref))
        name = unquote(fragment)
        if name and not name.startswith("/"):
            dynamic = referencing.jsonschema.DynamicAnchor
            missing = (referencing.exceptions.Unresolvable, referencing.exceptions.NoSuchResource)
            try:
                initial = self._registry.anchor(uri, name).value
            except missing:
                initial = None
            if isinstance(initial, dynamic):
                for outer in scope:
                    try:
                        found = self._registry.anchor(outer, name).value
                    except missing:
                        continue
                    if isinstance(found, dynamic):
                        return found.resource.contents, self._where(found.resource.contents, ref)
                return initial.resource.contents, self._where(initial.resource.contents, ref)
        return self.resolve(ref, pointer, holder, keyword="$dynamicRef")

    def resolve_recursive(self, ref: Any, pointer: str, holder: Any, scope: tuple[str, ...]) -> tuple[Any, str]:
        """The schema a ``$recursiveRef`` of ``holder`` names, and its pointer: its own schema
        resource, or where that has ``"$recursiveAnchor": true``, the outermost of the enclosing
        resources of ``scope`` (base URIs, outermost first) that have one without a gap.
        Raises :class:`SchemaError` for a value other than ``"#"``."""
        if ref != "#":
            raise SchemaError(f'$recursiveRef must be "#", got {ref!r}', keyword="$recursiveRef", pointer=pointer)
        target, target_ptr = self.resolve("#", pointer, holder, keyword="$recursiveRef")
        if not (isinstance(target, dict) and target.get("$recursiveAnchor") is True):
            return target, target_ptr
        for base in reversed(scope):  # innermost first
            outer = self._registry.contents(base)
            if not (isinstance(outer, dict) and outer.get("$recursiveAnchor") is True):
                break
            target, target_ptr = outer, self._where(outer, "#")
        return target, target_ptr

    def subschemas(self) -> list[tuple[Any, str]]:
        """Every subschema of the root (as JSON Schema's applicators define them, per the
        root's draft) with its JSON pointer."""
        resolvers = self._build()
        return [(obj, self._pointers.get(key, "#")) for key, obj in self._objects.items() if key in resolvers]

    def pointer_exists(self, pointer: str) -> bool:
        """Whether JSON pointer ``pointer`` (``"#/a/b"``) names a value in the root."""
        return self._walk(pointer)[1]

    def pointer_of(self, schema: Any) -> str | None:
        """The JSON pointer (``"#/…"``) of ``schema``, an object the root holds; None for one
        it does not (one the converter built)."""
        self._build()
        return self._pointers.get(id(schema)) if isinstance(schema, (dict, list)) else None

    def value_at(self, pointer: str) -> Any:
        """The value JSON pointer ``pointer`` names in the root (None where it names none)."""
        path, found = self._walk(pointer)
        return path[-1] if found else None

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
        return self._nearest(self._build(), holder, pointer)

    def base_for(self, holder: Any, pointer: str) -> str:
        """``holder``'s base URI, else that of the deepest schema on ``pointer``."""
        self._build()
        return self._nearest(self._bases, holder, pointer)

    def _nearest(self, table: dict[int, Any], holder: Any, pointer: str) -> Any:
        """``table``'s entry for ``holder``, else for the deepest object on ``pointer`` (the
        schema holding a reference keyword at its end) that has one: the root always does."""
        got = table.get(id(holder)) if holder is not None else None
        if got is not None:
            return got
        schema_ptr = pointer.rsplit("/", 1)[0] if pointer.endswith(("/$ref", "/$dynamicRef", "/$recursiveRef")) else pointer
        on_the_way = (table.get(id(node)) for node in reversed(self._walk(schema_ptr)[0]))
        return next(v for v in on_the_way if v is not None)

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
        self._registry = registry
        stack = [(root_resource, registry.resolver(base_uri=base), base)]
        while stack:
            resource, resolver, at = stack.pop()
            if id(resource.contents) in resolvers:
                continue
            resolvers[id(resource.contents)] = resolver
            self._objects[id(resource.contents)] = resource.contents
            self._bases[id(resource.contents)] = at
            for sub in resource.subresources():
                sub_id = sub.id()
                stack.append((sub, resolver.in_subresource(sub), urljoin(at, sub_id) if sub_id is not None else at))
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


def followed_scope(cv: Converter, schema: dict[str, Any], pointer: str, ref: str, scope: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The dynamic scope after following reference ``ref`` (a URI reference, resolved against
    the base URI of ``schema``, which holds it at ``pointer``) from ``scope`` (default: the
    converter's): ``referencing``'s ``Resolver._evolve``, which adds the current base URI when
    it is not empty and the scope is empty or ``ref`` names another resource.  Unchanged when
    the converter does not track it."""
    scope = cv.dynamic_scope if scope is None else scope
    if not cv.tracks_dynamic_scope:
        return scope
    base = cv.refs().base_for(schema, pointer)
    uri = base if ref.startswith("#") else urldefrag(urljoin(base, ref))[0]
    return (*scope, base) if base and (not scope or uri != base) else scope


def dynamic_target(cv: Converter, schema: dict[str, Any], ptr: str, scope: tuple[str, ...]) -> tuple[Any, str, tuple[str, ...]]:
    """(target, its pointer, the dynamic scope inside it) of the dynamic reference ``schema``
    holds at ``ptr`` (``$dynamicRef`` in 2020-12, ``$recursiveRef`` in 2019-09; the root must
    hold one, so the converter tracks the scope), evaluated in dynamic scope ``scope``.
    Raises ``SchemaError`` for one that does not resolve."""
    assert cv.tracks_dynamic_scope  # Converter.track_dynamic_scope started it (schema_to_ir calls it)
    keyword = cv.dynamic_ref_keyword()
    pointer = f"{ptr}/{keyword}"
    if keyword == "$dynamicRef":
        ref = schema["$dynamicRef"]  # a string: check_keyword_types saw to it
        inner = followed_scope(cv, schema, pointer, ref, scope)
        target, target_ptr = cv.refs().resolve_dynamic(ref, pointer, schema, inner)  # the anchor is looked up after the step
        return target, target_ptr, inner
    target, target_ptr = cv.refs().resolve_recursive(schema["$recursiveRef"], pointer, schema, scope)
    return target, target_ptr, followed_scope(cv, schema, pointer, cv.refs().base_of(target) or "#", scope)  # into the resolved resource


def convert_ref(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    """IR of ``schema``, which holds a ``$ref``: its target (with the keywords beside it)."""
    pointer = ptr + "/$ref"
    target, target_ptr = cv.resolve_ref(schema["$ref"], pointer, schema)
    return _follow(cv, schema, "$ref", target, target_ptr, ptr, followed_scope(cv, schema, pointer, schema["$ref"]))


def convert_dynamic_ref(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    """IR of ``schema``, which holds its draft's dynamic reference (``$dynamicRef``, 2020-12:
    :meth:`RefResolver.resolve_dynamic`; ``$recursiveRef``, 2019-09:
    :meth:`RefResolver.resolve_recursive`): resolved in the converter's dynamic scope, then
    followed as a ``$ref``."""
    target, target_ptr, scope = dynamic_target(cv, schema, ptr, cv.dynamic_scope)
    return _follow(cv, schema, str(cv.dynamic_ref_keyword()), target, target_ptr, ptr, scope)


def _follow(cv: Converter, schema: dict[str, Any], keyword: str, target: Any, target_ptr: str, ptr: str, scope: tuple[str, ...]) -> Node:
    """Convert reference ``keyword``'s target (with the keywords beside it, as ``allOf``) in
    dynamic scope ``scope``, counting one more unrolling of ``target_ptr``; raises
    :class:`RecursionLimit` past ``max_recursion_depth``."""
    rest = {k: v for k, v in schema.items() if k != keyword and k not in ANNOTATIONS}
    depth = cv.ref_depth.get(target_ptr, 0)
    if depth > cv.opt.max_recursion_depth:
        raise RecursionLimit(ptr)
    cv.ref_depth[target_ptr] = depth + 1
    outer, cv.dynamic_scope = cv.dynamic_scope, scope  # (the keywords beside it too: the step adds only the holder's own base URI)
    try:
        if rest:  # one identity per (schema object, target), so the conversion memo holds for it
            tag = f"{keyword}-siblings {target_ptr}"
            return cv.convert(cv.rewritten(schema, tag, lambda: {"allOf": [target, rest]}), ptr)
        return cv.convert(target, target_ptr)
    finally:
        cv.ref_depth[target_ptr] = depth
        cv.dynamic_scope = outer


def holds_dynamic_ref(root: Any, keyword: str = "$dynamicRef") -> bool:
    """Whether an object inside ``root`` (a parsed JSON value) has a ``keyword`` key
    (``$dynamicRef``, or ``$recursiveRef`` for 2019-09)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if keyword in node:
                return True
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return False


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
