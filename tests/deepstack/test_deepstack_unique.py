"""``deepstack.unique.sorted_unique`` is ``np.unique`` on the arrays the routing passes it, and a
fresh process's first evaluation no longer imports ``numpy.ma`` (np.unique's masked check)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from deepstack.unique import sorted_unique

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_sorted_unique_is_np_unique(seed: int, dtype: type) -> None:
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 3, 17, 400):
        a = rng.integers(-5, 9, size=n).astype(dtype)
        if dtype is np.float64:
            a = a * 0.37 + 1e6  # non-integral values with exact duplicates
        got, want = sorted_unique(a), np.unique(a)
        assert got.dtype == want.dtype
        assert got.tolist() == want.tolist()
        assert a.tolist() == a.tolist()  # the input is not sorted in place


def test_sorted_unique_two_dimensional_is_flattened() -> None:
    a = np.array([[3, 1, 3], [2, 1, 7]])
    assert sorted_unique(a).tolist() == np.unique(a).tolist() == [1, 2, 3, 7]
    assert a.tolist() == [[3, 1, 3], [2, 1, 7]]


def test_first_evaluation_does_not_import_numpy_ma() -> None:
    """The reference case's first evaluator in a new process (routing every collective) leaves
    ``numpy.ma`` unimported: importing it cost 7–11 ms of a 40 ms cold evaluation."""
    code = (
        "import sys\n"
        "from deepstack import load_noc_profile\n"
        "from plena_opt.estimate import Evaluator, Workload\n"
        "from plena_opt.memory import load_memory\n"
        "from plena_opt.models import load_model\n"
        "assert 'numpy.ma' not in sys.modules, 'imported before the evaluation'\n"
        "ev = Evaluator(load_model('llama-3.1-70b'),"
        " load_noc_profile('illustrative_gpu_cluster_32'), load_memory('fictional_stacked_dram'),"
        " Workload(batch_size=16, input_seq_len=2048, output_seq_len=16))\n"
        "assert len(ev.evaluate_batch(ev.legal_plans())) == 112\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "False"
