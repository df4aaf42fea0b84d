"""The versioned API: stubs are reproducible and current, every message and field is documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROTO = REPO / "proto" / "plena_opt" / "v1" / "plena_opt.proto"


def test_checked_in_stubs_match_a_fresh_generation():
    from plena_proto.codegen import stale_files

    assert stale_files() == [], (
        "run `python -m plena_proto.codegen` and commit proto/python/plena_proto"
    )


def test_codegen_check_cli_detects_a_stale_stub(tmp_path):
    from plena_proto import codegen

    codegen.generate(tmp_path)
    assert codegen.stale_files(tmp_path) == []
    stub = tmp_path / "plena_opt_pb2.py"
    stub.write_text(stub.read_text() + "\n# edited\n")
    assert codegen.stale_files(tmp_path) == ["plena_opt_pb2.py"]
    rc = subprocess.run(
        [sys.executable, "-m", "plena_proto.codegen", "--check"], capture_output=True
    ).returncode
    assert rc == 0


def _descriptor_with_comments(tmp_path: Path):
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    out = tmp_path / "api.pb"
    rc = protoc.main(
        [
            "protoc",
            f"-I{REPO / 'proto'}",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            "plena_opt/v1/plena_opt.proto",
        ]
    )
    assert rc == 0
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return fds.file[0]


def test_every_message_field_and_rpc_is_documented(tmp_path):
    fd = _descriptor_with_comments(tmp_path)
    assert fd.package == "plena_opt.v1"
    comments = {
        tuple(loc.path): (loc.leading_comments + loc.trailing_comments).strip()
        for loc in fd.source_code_info.location
    }
    missing = []
    for mi, msg in enumerate(fd.message_type):
        for fi, field in enumerate(msg.field):
            if not comments.get((4, mi, 2, fi)):  # 4 = message_type, 2 = field
                missing.append(f"{msg.name}.{field.name}")
    for si, svc in enumerate(fd.service):
        for ri, rpc in enumerate(svc.method):
            if not comments.get((6, si, 2, ri)):  # 6 = service, 2 = method
                missing.append(f"{svc.name}.{rpc.name}")
    assert missing == []


def test_proto_states_trace_encoding_and_deadline_limit():
    text = PROTO.read_text()
    assert "gzip" in text and "64 KiB" in text
    assert "longest supported deadline" in text.lower()


@pytest.mark.parametrize(
    "name",
    [
        "Search",
        "StreamSearch",
        "Estimate",
        "Simulate",
        "ListModels",
        "ListProfiles",
        "GetStudy",
        "CancelSearch",
    ],
)
def test_service_has_rpc(name):
    from plena_proto import plena_opt_pb2 as pb

    assert name in pb.DESCRIPTOR.services_by_name["PlenaOpt"].methods_by_name
