"""Leave-one-model-out over the fitted constants that see a fig09 model (``validate.lomo_moe``)."""

from __future__ import annotations

import pytest

from plena_opt.chip import load_chip
from plena_opt.validate.calibrate import read_rows
from plena_opt.validate.lomo_moe import MOE_MODEL_SHAPES, held_out_chip, model_mapes
from tests.conftest import require_shared


def _kernels():
    return require_shared() / "data" / "kernels"


def test_model_shapes_are_in_the_kernel_table():
    rows = read_rows(_kernels() / "b200_sxm_moe_vllm-0.19.0.csv.gz")
    shapes = {
        tuple(int(r[c]) for c in ("hidden_size", "inter_size", "topk", "num_experts")) for r in rows
    }
    assert set(MOE_MODEL_SHAPES.values()) <= shapes


@pytest.mark.parametrize("model", sorted(MOE_MODEL_SHAPES))
def test_held_out_moe_curves_are_refitted_without_the_model(model):
    shipped, held = load_chip("b200"), held_out_chip(_kernels(), model)
    fmt = "fp8_block" if model == "deepseek-v3" else "bf16"
    a, b = shipped.moe[fmt], held.moe[fmt]
    assert a.bandwidth_efficiency.value != b.bandwidth_efficiency.value  # refitted
    # fewer rows than the shipped fit: the model's shape is out
    assert _rows(b.bandwidth_efficiency.source) < _rows(a.bandwidth_efficiency.source)
    assert held.eager_host.seconds_per_op.value == shipped.eager_host.seconds_per_op.value
    assert held.eager_host.seconds_per_triton_op.value != pytest.approx(
        shipped.eager_host.seconds_per_triton_op.value, rel=1e-3
    )


def _rows(source: str) -> int:
    """The row count a fitted curve's source names (``(N rows; ...``)."""
    head = source.split(" rows")[0]
    return int(head.rsplit("(", 1)[1])


@pytest.mark.parametrize("model", sorted(MOE_MODEL_SHAPES))
def test_held_out_tpot_is_close_to_in_sample(model):
    """The MoE curves and the Triton constant do not hinge on the scored model: refitted
    without it, its decode and TPOT MAPE move by less than 1.5 points."""
    full = model_mapes(model, load_chip("b200"))
    held = model_mapes(model, held_out_chip(_kernels(), model))
    for ds in ("fig09", "fig09_tpot"):
        assert abs(held[ds] - full[ds]) < 1.5, (ds, full[ds], held[ds])
    assert held["fig09"] < 15.0
