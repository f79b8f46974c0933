"""One router per resource of the REST API (FastAPI's larger-application layout); :func:`api.app.create_app`
includes them all under the version prefix ``/v1``."""
