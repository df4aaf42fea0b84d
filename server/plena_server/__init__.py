"""plena-opt gRPC server (``plena_opt.v1.PlenaOpt``, proto in ``proto/plena_opt/v1``).

* ``plena_server.app.serve(host, port, storage, workers, limits)`` — run until SIGTERM/SIGINT,
  then drain; ``start_server(...) -> RunningServer`` for in-process use (tests, benchmarks).
* ``plena_server.service.PlenaOptServicer`` — the RPCs, each a thin adapter over a use case of
  ``plena_opt.api``: ``search_request`` maps a Search request, ``search_runner`` runs the job
  (slot, deadline, stop flag, re-check), ``studies`` reads stored studies (GetStudy, stale
  trials); ``simulate_job`` holds Simulate; ``convert`` maps requests to library objects with
  field-named errors (results ↔ proto: ``plena_opt.api.wire``); ``errors`` maps them to status
  codes with google.rpc.BadRequest details.
* ``plena_server.limits.ServerLimits`` — request limits; traces are packed by
  ``plena_proto.traces`` (gzip + 64 KiB chunks).
* ``python -m plena_proto.codegen [--check]`` — regenerate (or check) the stubs in
  ``plena_proto``.
* ``python -m plena_server [flags]`` — the same server as ``plena-opt serve``.
"""
