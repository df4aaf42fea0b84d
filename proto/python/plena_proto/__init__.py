"""The generated messages and stubs of the ``plena_opt.v1`` gRPC API, shared by the server and the
client (``python -m plena_proto.codegen`` regenerates them from ``proto/plena_opt/v1``), and the
trace packing both ends use (``plena_proto.traces``). Imports nothing of ``plena_opt``."""
