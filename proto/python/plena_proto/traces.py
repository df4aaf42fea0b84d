"""Trace packing: Chrome Trace JSON → gzip (RFC 1952) → chunks of at most 64 KiB (proto `Trace`)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

from plena_proto import plena_opt_pb2 as pb

CHUNK_BYTES = (
    64 * 1024
)  # grpc/grpc#11299: 16–64 KiB messages recommended (service-conventions §2.6)


def pack_trace(trace: dict | str | bytes, trace_id: str, plan_index: int = -1) -> pb.Trace:
    """Compress a Chrome trace (dict, JSON text or JSON bytes) into a chunked ``Trace``."""
    if isinstance(trace, dict):
        raw = json.dumps(trace, separators=(",", ":")).encode()
    elif isinstance(trace, str):
        raw = trace.encode()
    else:
        raw = bytes(trace)
    blob = gzip.compress(raw, compresslevel=6, mtime=0)
    chunks = [blob[i : i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)]
    return pb.Trace(
        trace_id=trace_id,
        plan_index=plan_index,
        compression="gzip",
        format="chrome-trace-json",
        uncompressed_bytes=len(raw),
        compressed_bytes=len(blob),
        chunks=chunks,
    )


def trace_chunks(trace: pb.Trace) -> Iterator[pb.TraceChunk]:
    """Split a packed trace into StreamSearch ``TraceChunk`` events."""
    n = len(trace.chunks)
    for i, data in enumerate(trace.chunks):
        yield pb.TraceChunk(
            trace_id=trace.trace_id,
            plan_index=trace.plan_index,
            index=i,
            last=i == n - 1,
            uncompressed_bytes=trace.uncompressed_bytes,
            data=data,
        )


def unpack_trace(trace: pb.Trace | list[bytes]) -> Any:
    """Decompress a ``Trace`` (or the data of its chunks, in order) back to the JSON object."""
    chunks = trace.chunks if isinstance(trace, pb.Trace) else trace
    return json.loads(gzip.decompress(b"".join(chunks)))
