"""plena-opt gRPC client library."""
