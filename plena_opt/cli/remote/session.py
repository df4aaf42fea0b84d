"""Remote mode: the client session, its error behaviour and the streamed search.

Server errors become ``PlenaInputError`` (INVALID_ARGUMENT / NOT_FOUND …: ``error: …``, exit 2),
and so does an unreachable server (UNAVAILABLE: the ``--server`` flag names no running server);
a failing server is ``RemoteUnavailable`` (the command prints it, exits 1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
from plena_client.client import PlenaClient
from plena_client.credentials import Credentials
from plena_client.errors import PlenaRpcError
from plena_proto import plena_opt_pb2 as pb
from plena_proto.traces import unpack_trace

from plena_opt.api.search_io import Progress, SearchResult
from plena_opt.api.serving_wire import decisions_from_proto
from plena_opt.cli.remote.requests import search_request_from_args
from plena_opt.errors import PlenaInputError, PlenaNotFoundError

USER_ERRORS = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)
_FLAG_OF_FIELD = {
    "input_seq_len": "input_seq",
    "output_seq_len": "output_seq",
    "overlap_policy": "overlap",
    "trials": "trials",
}
_STAGE_NAMES = {
    pb.STAGE_SEARCH: "search",
    pb.STAGE_RECHECK: "recheck",
    pb.STAGE_TRACES: "traces",
    pb.STAGE_DONE: "done",
}


class RemoteUnavailable(Exception):
    """The server could not be reached or failed (not a user-input error)."""


@contextlib.contextmanager
def rpc_errors() -> Iterator[None]:
    """Turn a failed RPC into the CLI's error behaviour (see module docstring)."""
    try:
        yield
    except PlenaRpcError as exc:
        if exc.code == grpc.StatusCode.UNAUTHENTICATED:
            raise PlenaInputError(
                "token_file",
                "the server refused the credentials (UNAUTHENTICATED): give its token with "
                "--token-file or $PLENA_OPT_TOKEN",
            ) from None
        if exc.code in USER_ERRORS:
            leaf = (exc.field or "server").rsplit(".", 1)[-1]
            field = _FLAG_OF_FIELD.get(leaf, leaf)
            cls = PlenaNotFoundError if exc.code == grpc.StatusCode.NOT_FOUND else PlenaInputError
            raise cls(field, exc.message) from None
        if exc.code == grpc.StatusCode.UNAVAILABLE:  # nothing serves at --server: fix the flag
            raise PlenaInputError(
                "server",
                f"--server: cannot reach a plena-opt server ({exc}); start one with "
                "plena-opt serve or give the right HOST:PORT",
            ) from None
        raise RemoteUnavailable(f"server error: {exc}") from None


def client_of(args: argparse.Namespace) -> PlenaClient:
    timeout = getattr(args, "server_timeout", None)
    return PlenaClient(
        args.server, credentials=credentials_of(args), **({"timeout": timeout} if timeout else {})
    )


_CREDENTIAL_FLAGS = {
    "token_file": "--token-file",
    "root_ca": "--server-ca",
    "client_cert": "--client-cert",
    "client_key": "--client-key",
}


def credentials_of(args: argparse.Namespace) -> Credentials:
    """The token (``--token-file``, else ``$PLENA_OPT_TOKEN``) and TLS files of ``--server``;
    ``PlenaInputError`` naming the flag for an unreadable file or a lone cert/key."""
    files = {
        "token_file": getattr(args, "token_file", None),
        "root_ca": getattr(args, "server_ca", None),
        "client_cert": getattr(args, "client_cert", None),
        "client_key": getattr(args, "client_key", None),
    }
    if bool(files["client_cert"]) != bool(files["client_key"]):
        raise PlenaInputError("client_cert", "--client-cert and --client-key go together")
    for name, path in files.items():
        if path is not None:
            try:
                Path(path).read_bytes()
            except OSError as exc:
                flag = _CREDENTIAL_FLAGS[name]
                raise PlenaInputError(
                    flag[2:].replace("-", "_"), f"{flag}: cannot read {path}: {exc.strerror}"
                ) from None
    return Credentials.load(**files)


def fail(exc: RemoteUnavailable) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def received_traces(traces: dict[str, list[bytes] | pb.Trace]) -> dict[str, Any]:
    """Received traces (a packed ``Trace`` or its chunks, by name) as Chrome trace documents."""
    return {name: unpack_trace(data) for name, data in traces.items()}


@dataclass
class RemoteSearch:
    """A remote search: the library ``SearchResult``, the re-check (``RecheckResult.to_dict()``
    documents, trace paths local) and attribute views of it for ``render_recheck``."""

    result: SearchResult
    recheck: list[dict]
    checks: list[Any]


def _check_view(doc: dict) -> Any:
    """Attribute view of a ``RecheckResult.to_dict()`` (what ``render_recheck`` reads)."""
    view = SimpleNamespace(**{k: v for k, v in doc.items() if k != "serving"})
    view.serving = SimpleNamespace(**doc["serving"])
    return view


def _progress_of(p: pb.SearchProgress) -> Progress:
    total = p.trials_total or None
    stage = _STAGE_NAMES.get(p.stage, "search")
    return Progress(stage, p.trials_done, total, p.trials_per_second, p.front_size, p.hypervolume)


def _stream(
    client: PlenaClient, request: pb.SearchRequest, timeout: float, progress: Any
) -> tuple[pb.SearchResult | None, dict[str, list[bytes]]]:
    """Read StreamSearch events: report progress, gather trace chunks, keep the result. A
    KeyboardInterrupt asks the server to stop (CancelSearch); the stream then ends with the
    partial result."""
    study = ""
    final = None
    chunks: dict[str, list[bytes]] = {}
    events = client.stream_search(request, timeout=timeout)
    while True:
        try:
            event = next(events)
        except StopIteration:
            break
        except KeyboardInterrupt:
            if study:
                client.cancel_search(study)
                continue
            raise
        kind = event.WhichOneof("event")
        if kind == "progress":
            study = event.progress.study_name
            if progress is not None:
                progress(_progress_of(event.progress))
        elif kind == "trace_chunk":
            chunks.setdefault(event.trace_chunk.trace_id, []).append(event.trace_chunk.data)
        elif kind == "result":
            final = event.result
    return final, chunks


def run_search_remote(
    args: argparse.Namespace,
    progress: Callable[[Progress], None] | None = None,
    client: PlenaClient | None = None,
) -> RemoteSearch:
    """Run the search on ``args.server`` (StreamSearch): result, re-check and traces.

    ``progress`` receives ``Progress`` reports like a local search. Traces of the re-check are
    written to ``args.trace_dir`` under the names local mode uses.
    """
    from plena_opt.api.simulation_io import write_trace

    request = search_request_from_args(args)
    own = client is None
    client = client or client_of(args)
    timeout = client.search_timeout
    if request.options.HasField("timeout_seconds"):
        timeout = request.options.timeout_seconds + 60.0
    try:
        with rpc_errors():
            final, chunks = _stream(client, request, timeout, progress)
    finally:
        if own:
            client.close()
    if final is None:
        raise RemoteUnavailable("the server ended the search without a result")
    if not final.result_json:  # the server read the front from the study at the deadline
        raise RemoteUnavailable(
            f"the search did not finish before the deadline; {len(final.front)} front plans "
            f"are stored in study {final.study_name!r}"
        )
    result = SearchResult.model_validate_json(final.result_json)
    result.serving.update(decisions_from_proto(final.serving))
    if result.under_load and "comparison" in result.serving:  # priced under the search's load
        from plena_opt.api.serving_loaded import mark_loaded

        mark_loaded(result.serving["comparison"], result.under_load)
    trace_dir = getattr(args, "trace_dir", None)
    paths = {}
    if trace_dir:
        for name, trace in received_traces(chunks).items():
            paths[name] = str(write_trace(Path(trace_dir) / f"{name}.json", trace))
    recheck = json.loads(final.recheck_json or "[]")
    for doc in recheck:
        doc["trace_paths"] = [paths[t] for t in doc["trace_paths"] if t in paths]
    return RemoteSearch(result, recheck, [_check_view(d) for d in recheck])
