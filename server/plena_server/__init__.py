"""plena-opt gRPC server (``plena_opt.v1.PlenaOpt``, proto in ``proto/plena_opt/v1``).

* ``plena_server.app.serve(host, port, storage, workers, limits)`` — run until SIGTERM/SIGINT,
  then drain; ``start_server(...) -> RunningServer`` for in-process use (tests, benchmarks).
* ``plena_server.service.PlenaOptServicer`` — the RPCs; ``search_job`` / ``simulate_job`` hold
  Search/StreamSearch/GetStudy and Simulate; ``convert`` maps proto ↔ library objects with
  field-named errors; ``errors`` maps them to status codes with google.rpc.BadRequest details.
* ``plena_server.limits.ServerLimits`` — request limits; ``traces`` — gzip + 64 KiB chunks.
* ``python -m plena_proto.codegen [--check]`` — regenerate (or check) the stubs in ``gen/``.
* ``python -m plena_server [flags]`` — the same server as ``plena-opt serve``.
"""
