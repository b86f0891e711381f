"""The HTTP API, one module per resource (docs/service.md lists every path)."""
