"""The FGBDT-Chain REST API (FastAPI): versioned paths under ``/v1``, typed models, signed state changes.

Why this shape: reads are public and come straight from the chain (views and events), so any client can check what it
is told; every state change is an ERC-2771 request signed by the caller's key, rebuilt from the typed body and checked
(signature, expiry, nonce, on-chain role) before the API's relayer pays for it.

The application is assembled here from parts named for what they do (FastAPI's larger-application layout):

* ``api.routers``: one router per resource (``meta``, ``tasks``, ``members``, ``results``, ``events``,
  ``dashboard``, ``deposits``);
* ``api.dependencies``: the typed dependencies the routes declare (backend, task lookup, signed-request check);
* ``api.error_handlers``: the one place that maps errors to responses (422 for bad input, 401/403/404/409 from the
  backend's checks and the contract's reverts, 503 with ``Retry-After`` when the chain is unreachable, a generic
  500 and never a stack trace);
* ``api.docs``: Swagger UI at ``/docs`` and ReDoc at ``/redoc`` with their assets served locally (they work offline);
* ``api.dashboard``: the browser dashboard at ``/`` (``api/static``), which reads and signs through ``/v1``;
* ``api.limits``: what one client may ask of the server (body size, open event streams, prediction batch), each
  refused with a 4xx that names the limit;
* ``api.service``: the chain access itself, ``api.models``: the request and response models.
"""

from __future__ import annotations

from fastapi import FastAPI

from fgbdt_chain.api.dashboard import install_dashboard
from fgbdt_chain.api.docs import install_docs
from fgbdt_chain.api.error_handlers import register_error_handlers
from fgbdt_chain.api.limits import BodyLimit
from fgbdt_chain.api.routers import dashboard, deposits, events, members, meta, results, tasks
from fgbdt_chain.api.service import Backend, Settings

API_PREFIX = "/v1"
"""The version of every resource path; a breaking change gets a new prefix next to this one."""

DESCRIPTION = (
    "Federated gradient boosting with on-chain fairness. Reads are public. State changes carry `auth`: an "
    "EIP-712 signature of an ERC-2771 `ForwardRequest` (OpenZeppelin ERC2771Forwarder) whose `data` is the "
    "calldata of the endpoint's contract call, rebuilt by the API from the body; the API checks it and the "
    "signer's on-chain role, then relays it. Rewards are deposited with a direct `fund(taskId)` transaction, sent "
    "by the depositor or signed by it and broadcast with `POST /v1/tasks/{task_id}/deposit`."
)


def create_app(backend: Backend) -> FastAPI:
    """The application bound to ``backend`` (tests pass their own, the ``serve`` command one from its flags)."""
    app = FastAPI(title="FGBDT-Chain API", version="1.0.0", description=DESCRIPTION, docs_url=None, redoc_url=None)
    app.state.backend = backend
    routers = (meta.router, tasks.router, members.router, results.router, events.router, dashboard.router)
    for router in (*routers, deposits.router):
        app.include_router(router, prefix=API_PREFIX)
    register_error_handlers(app)
    app.add_middleware(BodyLimit, limit=backend.settings.limits.max_body_bytes)
    install_docs(app)
    install_dashboard(app)
    return app


def settings_app(rpc_url: str, contract: str, forwarder: str | None = None, relayer_key: str | None = None) -> FastAPI:
    """Convenience: an app from plain settings."""
    return create_app(Backend(Settings(rpc_url, contract, forwarder, relayer_key)))
