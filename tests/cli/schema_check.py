"""The part of JSON Schema (2020-12) that docs/schema/*.schema.json use:
type, const, enum, required, properties, additionalProperties (a schema),
items, minimum and local $ref. validate() returns the list of violations
(empty: the document conforms); no dependency beyond the standard library.
"""
import json

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, t):
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def validate(doc, schema, root=None, path="$"):
    root = root or schema
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/"), ref
        target = root
        for part in ref[2:].split("/"):
            target = target[part]
        return validate(doc, target, root, path)
    errors = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(doc, t) for t in types):
            return [f"{path}: {json.dumps(doc)[:60]} is not of type {types}"]
    if "const" in schema and doc != schema["const"]:
        errors.append(f"{path}: {doc!r} != {schema['const']!r}")
    if "enum" in schema and doc not in schema["enum"]:
        errors.append(f"{path}: {doc!r} not in {schema['enum']}")
    if "minimum" in schema and _is(doc, "number") and doc < schema["minimum"]:
        errors.append(f"{path}: {doc} < {schema['minimum']}")
    if isinstance(doc, dict):
        for key in schema.get("required", []):
            if key not in doc:
                errors.append(f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        for key, value in doc.items():
            if key in props:
                errors += validate(value, props[key], root, f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(value, schema["additionalProperties"], root, f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected key {key!r}")
    if isinstance(doc, list) and "items" in schema:
        for i, value in enumerate(doc):
            errors += validate(value, schema["items"], root, f"{path}[{i}]")
    return errors


def validate_file(doc, schema_path):
    with open(schema_path) as f:
        return validate(doc, json.load(f))
