"""plena-opt gRPC server."""
