"""Go's JSON decoding: how execd reads request bodies and words its decoding errors."""

import json

from exchange import bad_request


class GoType:
    """A Go type a JSON value is decoded into; null always decodes (to the zero value)."""

    def __init__(self, name: str, accepts):
        self.name = name
        self.accepts = accepts


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def go_integer(name: str, low: int, high: int) -> GoType:
    return GoType(name, lambda value: _is_integer(value) and low <= value < high)


GO_STRING = GoType("string", lambda value: isinstance(value, str))
GO_BOOL = GoType("bool", lambda value: isinstance(value, bool))
GO_INT = go_integer("int", -(2**63), 2**63)
GO_STRING_MAP = GoType(
    "map[string]string",
    lambda value: isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
)


def _json_kind(value) -> str:
    """How Go's decoding errors name a JSON value ("string", "number 1.5", "object")."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {json.dumps(value)}"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _cannot_unmarshal(value, type_name: str) -> ValueError:
    return ValueError(
        f"json: cannot unmarshal {_json_kind(value)} into Go value of type {type_name}"
    )


class GoStruct:
    """A Go struct of JSON fields; missing and null fields decode to None."""

    def __init__(self, name: str, fields: dict):
        self.name = name
        self.fields = fields

    def decode(self, value) -> dict:
        if value is None:
            value = {}  # Go decodes null into a struct as "leave it zero"
        if not isinstance(value, dict):
            raise _cannot_unmarshal(value, f"model.{self.name}")
        for key, go_type in self.fields.items():
            if value.get(key) is not None and not go_type.accepts(value[key]):
                raise ValueError(
                    f"json: cannot unmarshal {_json_kind(value[key])} into Go struct field "
                    f"{self.name}.{key} of type {go_type.name}"
                )
        return {key: value.get(key) for key in self.fields}


class GoMapOf:
    """A Go map[string]model.X of structs; null decodes into a nil map, read here as empty."""

    def __init__(self, item: GoStruct):
        self.item = item

    def decode(self, value) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise _cannot_unmarshal(value, f"map[string]model.{self.item.name}")
        return {key: self.item.decode(element) for key, element in value.items()}


class GoSliceOf:
    """A Go []model.X of structs; null decodes into a nil slice, read here as empty."""

    def __init__(self, item: GoStruct):
        self.item = item

    def decode(self, value) -> list[dict]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise _cannot_unmarshal(value, f"[]model.{self.item.name}")
        return [self.item.decode(element) for element in value]


def decode_first_json_value(body: bytes):
    """json.NewDecoder(body).Decode reads the first JSON value; an empty body is EOF
    (docs/execd-wire.rst, wire-errors)."""
    text = body.decode("utf-8", "replace").lstrip()
    if not text:
        raise ValueError("EOF")
    try:
        return json.JSONDecoder().raw_decode(text)[0]
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON: {error.msg} at offset {error.pos}") from None


def decode_request_body(body: bytes, decode):
    """An undecodable body is a 400 INVALID_REQUEST_BODY (docs/execd-wire.rst, wire-errors)."""
    try:
        return decode(decode_first_json_value(body))
    except ValueError as error:
        raise bad_request(f"error parsing request, MAYBE invalid body format. {error}") from None
