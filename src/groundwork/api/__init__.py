"""The HTTP API: thin FastAPI routes over `groundwork.pipeline`."""
