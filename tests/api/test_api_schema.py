"""Property-based run over the API's OpenAPI schema (schemathesis): generated requests never get a 500, and every
response conforms to the documented status codes, content types and schemas.

Kept fast (a few examples per operation) so it runs in the normal suite. The progress stream is excluded: it is an
open-ended stream, tested on its own in ``test_api_endpoints``.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend

pytestmark = pytest.mark.chain

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]


def test_openapi_property(backend: Backend) -> None:
    """Every operation, a few generated cases each (schemathesis' pytest plugin does not support pytest 9's
    fixtures, so the operations are driven here with plain Hypothesis)."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(backend))
    labels = []
    seen: set[int] = set()
    for result in schema.get_all_operations():
        op = result.ok()
        if op.path.endswith("/events"):
            continue
        labels.append(op.label)

        @given(case=op.as_strategy())
        @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        def run(case: schemathesis.Case) -> None:
            seen.add(case.call_and_validate(checks=CHECKS).status_code)

        run()
    assert {200, 401, 422} <= seen, seen
    assert "POST /v1/tasks" in labels and "GET /v1/tasks/{task_id}/model" in labels
