"""Generated protobuf/gRPC stubs (see plena_server.codegen); do not edit."""
