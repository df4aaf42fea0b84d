"""``search --plot``: every scored plan drawn, log axes on wide ranges, labels apart."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from plena_opt.search.result import FrontEntry, SearchResult  # noqa: E402
from plena_opt.search.run.output import draw_front, plot_front  # noqa: E402


def _entry(label: str, ttft_ms: float, tps: float, memory: float = -1.0) -> FrontEntry:
    plan = {"tp": 1, "ep": 1, "dp": 1, "pp": 1, "cp": 1, "batch_size": 16}
    return FrontEntry(plan=plan, label=label, ttft_ms=ttft_ms, tps=tps, tps_per_sequence=tps / 16,
                      energy_j_per_token=0.1 + tps / 1e4, weight_bytes_per_device=1.0,
                      kv_cache_bytes_per_device=1.0, memory_bytes_per_device=2.0,
                      fits_in_memory=memory <= 0, bottleneck="dram",
                      constraints={"memory": memory})  # fmt: skip


def _result() -> SearchResult:
    # A crowded front: six plans within a few ms and tokens/s of each other (labels would stack
    # on the markers), plus dominated and infeasible plans spanning 100x in TPS.
    front = [
        _entry(f"tp{2**i} dp{8 // 2**i} overlap b16", 700 + 9 * i, 150 - 2 * i) for i in range(4)
    ]
    front += [_entry("tp32 overlap b16", 2100, 229), _entry("pp4 tp8 b16", 650, 81)]
    rest = [_entry("pp8 b16", 3100, 2.0), _entry("tp2 b16", 900, 40)]
    rest += [_entry("dp32 b16", 1500, 60, memory=3e9)]
    return SearchResult(study_name="s-1f75918d", storage=":memory:", sampler="exhaustive",
                        objectives=["ttft", "tps"], metric_names=["ttft_ms", "tps"],
                        directions=["minimize", "maximize"], constraints=["memory"],
                        legal_points=9, evaluated=9, reused=0, trials=9, pruned_illegal=0,
                        repeats=0, front=front,
                        scored=front + rest)  # fmt: skip


def test_plot_draws_every_scored_plan_with_collision_free_labels() -> None:
    result = _result()
    fig, boxes = draw_front(result, title="llama-3.1-70b on illustrative_gpu_cluster_32")
    try:
        ax = fig.axes[0]
        assert ax.get_title() == "llama-3.1-70b on illustrative_gpu_cluster_32"
        assert ax.get_yscale() == "log"  # TPS spans 2 … 229
        assert ax.get_xscale() == "linear"  # TTFT spans 650 … 3100 (< 10x)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend == ["infeasible (1)", "dominated (2)", "Pareto front (6)"]
        assert len(boxes) == len(result.front)
        frame = ax.bbox
        for i, a in enumerate(boxes):
            assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
            for b in boxes[i + 1 :]:
                assert not a.overlaps(b), "two front labels overlap"
        markers = [tuple(ax.transData.transform((e.ttft_ms, e.tps))) for e in result.front]
        for box in boxes:
            for x, y in markers:
                assert not box.contains(x, y), "a label covers a front marker"
    finally:
        plt.close(fig)


def test_plot_front_writes_the_file(tmp_path) -> None:
    path = tmp_path / "front.png"
    plot_front(_result(), path, title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
