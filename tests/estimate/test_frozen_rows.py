"""Balanced routing rows are frozen and shared by every context (r11cold, issue 26), so the
network's EP dispatch keeps their content key by identity (``deepstack.collectives``)."""

from __future__ import annotations

import deepstack as ds
import numpy as np


def test_balanced_rows_are_frozen_and_shared_by_contexts() -> None:
    """A context's balanced routing rows are read-only and the same array for every context of
    that model and token count; the EP dispatch's views of them are the same objects too."""
    from deepstack import load_noc_profile

    from plena_opt.chip import load_chip
    from plena_opt.estimate import Workload
    from plena_opt.estimate.comm import _head
    from plena_opt.estimate.context import EstimateContext
    from plena_opt.estimate.gpu import gpu_memory
    from plena_opt.models import load_model

    chip = load_chip("h100-sxm")
    noc, mem, model = (
        load_noc_profile("hgx-h100x8"),
        gpu_memory(chip),
        load_model("qwen3-235b-a22b"),
    )
    wl = Workload(batch_size=2, input_seq_len=1024, output_seq_len=1, precision="fp8")
    a = EstimateContext(model, noc, mem, wl, chip).rows(2048)
    b = EstimateContext(model, noc, mem, wl, chip).rows(2048)
    assert a is b and not a.flags.writeable and a.shape[0] >= 2048
    base = a.base  # np.resize's rows are a view: their memory is frozen too
    assert base is None or not base.flags.writeable
    assert np.array_equal(a, ds.moe.balanced_rows(2048, model.num_experts, model.top_k))
    assert _head(a, 1024) is _head(a, 1024) and np.array_equal(_head(a, 1024), a[:1024])
    w = np.array(a)
    assert _head(w, 8) is not _head(w, 8)  # writeable rows: a new view each time
