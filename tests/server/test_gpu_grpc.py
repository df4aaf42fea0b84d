"""GPU chips over the gRPC conversion layer: precision fields, the chip's own HBM."""

from __future__ import annotations

import pytest
from plena_proto import plena_opt_pb2 as pb
from plena_server import convert
from plena_server.limits import ServerLimits

from plena_opt.errors import PlenaInputError


def _system(chip: str, noc: str) -> pb.SystemSpec:
    return pb.SystemSpec(
        model=pb.ModelSource(name="llama-3.1-8b"),
        noc=pb.ProfileSource(name=noc),
        chip=pb.ProfileSource(name=chip),
    )


def test_gpu_system_uses_the_chip_hbm_and_precision_fields():
    system = convert.load_system(_system("h200-sxm", "hgx-h200x8"), ServerLimits())
    assert system.memory.capacity_bytes == round(141e9)
    w = convert.to_workload(pb.Workload(precision="fp8", kv_precision="fp8"))
    assert (w.precision, w.kv_precision) == ("fp8", "fp8")
    assert convert.to_workload(pb.Workload()).precision is None


def test_unknown_precision_names_the_field():
    with pytest.raises(PlenaInputError) as err:
        convert.to_workload(pb.Workload(precision="fp9"))
    assert "precision" in err.value.field
