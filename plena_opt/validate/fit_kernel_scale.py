"""Fit ``serving.kernel_scale``'s TensorRT-LLM decode constants on the shipped serving rows.

``python -m plena_opt.validate.fit_kernel_scale`` prices the TensorRT-LLM rows of the fit set
with the constants off and prints, per architecture, the geometric mean of measured / predicted
TPOT (the constant), the rows it rests on and each model's leave-one-model-out figure (the
constant fitted on the other models, that model's TPOT MAPE before → after).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# architecture -> (system of its rows, models fitted on); DeepSeek-R1 is left out (its rows mix
# runs with and without speculative decoding: serving.kernel_scale)
FIT_SET = {
    "blackwell": ("b200_sxm", ("meta-llama/Llama-3.1-70B", "openai/gpt-oss-120b")),
    "hopper": ("h100_sxm", ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B")),
}


@contextmanager
def constants_off() -> Iterator[None]:
    """Price with every decode-kernel constant at 1 inside the block (the fit's baseline)."""
    from plena_opt.serving.kernel_scale import DECODE_SCALE

    saved = {k: dict(v) for k, v in DECODE_SCALE.items()}
    DECODE_SCALE.clear()
    try:
        yield
    finally:
        DECODE_SCALE.update(saved)


def fit_rows(path: Path | None = None) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """architecture -> model -> [(measured, predicted TPOT ms)] of the fit set, constants off."""
    from plena_opt.validate.serving_rows import read_rows
    from plena_opt.validate.serving_score import _price_row, shipped_serving_csv

    out: dict[str, dict[str, list[tuple[float, float]]]] = {a: {} for a in FIT_SET}
    steps: dict = {}
    with constants_off():
        for row in read_rows(path or shipped_serving_csv()):
            for arch, (system, models) in FIT_SET.items():
                f = row.fields
                if f.get("backend") != "trtllm" or f.get("system") != system:
                    continue
                if f.get("model_path") not in models or not row.measured_ms("tpot_ms"):
                    continue
                r = _price_row(row, steps, {})
                if r.status == "priced":
                    pair = (r.measured_tpot_ms, r.tpot_ms)
                    out[arch].setdefault(r.model, []).append(pair)  # type: ignore[arg-type]
    return out


def geometric_ratio(pairs: list[tuple[float, float]]) -> float:
    """Geometric mean of measured / predicted."""
    return math.exp(statistics.fmean(math.log(m / p) for m, p in pairs))


def mape(pairs: list[tuple[float, float]], scale: float = 1.0) -> float:
    """MAPE (%) of the predictions × ``scale``."""
    return 100 * statistics.fmean(abs(p * scale / m - 1) for m, p in pairs)


def main() -> None:
    rows = fit_rows()
    for arch, by_model in rows.items():
        pairs = [p for v in by_model.values() for p in v]
        print(f"{arch}: {geometric_ratio(pairs):.3f} on {len(pairs)} rows "
              f"({', '.join(f'{m} {len(v)}' for m, v in by_model.items())})")  # fmt: skip
        for model, held in by_model.items():
            rest = [p for m, v in by_model.items() if m != model for p in v]
            k = geometric_ratio(rest)
            print(f"  leave out {model}: {k:.3f} fitted on the rest, its TPOT MAPE "
                  f"{mape(held):.1f} -> {mape(held, k):.1f} %")  # fmt: skip


if __name__ == "__main__":
    main()
