"""Tests of the gRPC server and client (``plena_server``, ``plena_client``)."""
