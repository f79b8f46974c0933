"""Writes ``reference/rest.md``: the REST API from the OpenAPI document the API serves at ``/openapi.json``.

Why from the schema: the routes, their models and their error responses are declared once in ``api/`` (FastAPI);
the page lists exactly what the running API accepts and returns. Building the document needs no chain: the backend
connects on first use, and describing the routes uses none (as ``tests/api/test_docs_offline.py`` checks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _md import cell, code, slug, table, text

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend, Settings

PAGE = "reference/rest.md"
METHODS = ("get", "post", "put", "patch", "delete")
MODEL_PREFIX = "#/components/schemas/"


def schema_document() -> dict[str, Any]:
    """The OpenAPI document of an app whose backend never connects (port 9, the discard port: nothing is read)."""
    return create_app(Backend(Settings("http://127.0.0.1:9", "0x" + "00" * 20))).openapi()


def model_link(ref: str) -> str:
    name = ref.removeprefix(MODEL_PREFIX)
    return f"[{name}](#{slug('model ' + name)})"


def type_of(schema: dict[str, Any]) -> str:
    """A short Markdown rendering of a JSON schema's type: a link for a model, ``T | null``, ``list of T``."""
    if not schema:
        return "any"
    if "$ref" in schema:
        return model_link(schema["$ref"])
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(type_of(s) for s in schema.get("anyOf", schema.get("oneOf", [])))
    if "enum" in schema:
        return "one of " + ", ".join(code(json.dumps(v)) for v in schema["enum"])
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items", {})
        return f"list of {type_of(items)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {type_of(schema['additionalProperties'])}"
    shown = code(str(kind))
    if "format" in schema:
        shown += f" ({text(schema['format'])})"
    return shown


def bounds(schema: dict[str, Any]) -> str:
    """A schema's constraints in words (range, length, pattern), for the table's last column."""
    said = []
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("minLength", "length >="),
        ("maxLength", "length <="),
        ("minItems", "items >="),
        ("maxItems", "items <="),
    ):
        if key in schema:
            value = schema[key]
            if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
                value = int(value)
            said.append(f"{word} {value}")
    if "pattern" in schema:
        said.append("matches " + code(schema["pattern"]))
    for sub in schema.get("anyOf", []):
        if sub.get("type") != "null" and (inner := bounds(sub)):
            said.append(inner)
    return ", ".join(said)


def describe(schema: dict[str, Any], fallback: str = "") -> str:
    parts = [cell(schema.get("description") or fallback)]
    if "default" in schema:
        parts.append("Default: " + code(json.dumps(schema["default"])) + ".")
    if said := bounds(schema):
        parts.append(cell(said) + ".")
    return " ".join(p for p in parts if p)


def operation_section(path: str, method: str, op: dict[str, Any]) -> str:
    title = f"{method.upper()} {path}"
    out = [f"### `{title}` {{#{slug(title)}}}\n"]
    if op.get("summary"):
        out.append(f"*{text(op['summary'])}*\n")
    if op.get("description"):
        out.append("\n\n".join(text(" ".join(p.split())) for p in op["description"].split("\n\n")) + "\n")
    params = op.get("parameters", [])
    if params:
        rows = [
            [
                code(p["name"]),
                p["in"],
                "yes" if p.get("required") else "no",
                type_of(p.get("schema", {})),
                describe(p.get("schema", {}), p.get("description", "")),
            ]
            for p in params
        ]
        out.append("**Parameters**\n\n" + table(["name", "in", "required", "type", "description"], rows))
    body = op.get("requestBody")
    if body:
        kinds = body.get("content", {})
        shown = [f"{code(kind)}: {type_of(c.get('schema', {}))}" for kind, c in kinds.items()]
        out.append(
            "**Request body**" + (" (required)" if body.get("required") else "") + ": " + "; ".join(shown) + "\n"
        )
    rows = []
    for status, response in op.get("responses", {}).items():
        content = response.get("content", {})
        bodies = []
        for kind, c in content.items():
            schema = c.get("schema")
            bodies.append(code(kind) + (f": {type_of(schema)}" if schema else ""))
        rows.append([code(status), cell(response.get("description", "")), "; ".join(bodies)])
    rows.sort(key=lambda r: r[0])
    out.append("**Responses**\n\n" + table(["status", "meaning", "body"], rows))
    return "\n".join(out)


def model_section(name: str, schema: dict[str, Any]) -> str:
    out = [f"### {name} {{#{slug('model ' + name)}}}\n"]
    if schema.get("description"):
        out.append("\n\n".join(text(" ".join(p.split())) for p in schema["description"].split("\n\n")) + "\n")
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    if props:
        rows = [
            [code(field), "yes" if field in required else "no", type_of(s), describe(s)] for field, s in props.items()
        ]
        out.append(table(["field", "required", "type", "description"], rows))
    elif "enum" in schema:
        out.append("One of " + ", ".join(code(json.dumps(v)) for v in schema["enum"]) + ".\n")
    if "example" in schema:
        out.append("Example:\n\n```json\n" + json.dumps(schema["example"], indent=2) + "\n```\n")
    return "\n".join(out)


def page() -> str:
    doc = schema_document()
    info = doc["info"]
    out = [
        "# REST API\n",
        f"{text(info['title'])}, version {text(info['version'])} (OpenAPI {doc['openapi']}). `fgbdt serve` serves "
        "it (by default on port 8000, bound to the running devnet); the running API also serves this document as "
        "`/openapi.json`, with Swagger UI at `/docs` and ReDoc at `/redoc` (their assets are served by the API "
        "itself, so they work offline). This page is generated from that document when the site is built.\n",
        text(" ".join(info.get("description", "").split())) + "\n",
        "Errors have one shape ([ErrorResponse](#model-errorresponse)) except validation errors "
        "([HTTPValidationError](#model-httpvalidationerror), status 422, field by field): 401 a bad or missing "
        "signature, 403 a signer without the on-chain role, 404 an unknown task, 409 a call the contract would "
        "revert (its error name in the body), 503 with `Retry-After` when the chain is unreachable.\n",
        "## Endpoints\n",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in doc["paths"].items():
        for method in METHODS:
            if method in methods:
                op = methods[method]
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((path, method, op))
    summary_rows = [
        [f"[`{m.upper()} {p}`](#{slug(m.upper() + ' ' + p)})", cell(op.get("summary", "")), tag]
        for tag, ops in by_tag.items()
        for p, m, op in ops
    ]
    out.append(table(["method and path", "summary", "group"], summary_rows))
    for tag, ops in by_tag.items():
        out.append(f"## {tag.capitalize()} {{#{slug('group ' + tag)}}}\n")
        out += [operation_section(p, m, op) for p, m, op in ops]
    out.append("## Models\n")
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        out.append(model_section(name, schema))
    return "\n".join(out)


with mkdocs_gen_files.open(PAGE, "w") as f:
    f.write(page())
