"""Memory of one parsed model and its evaluator context versus the layer count (issue 10).

Usage: ``python benchmarks/bench_model_memory.py [--layers 64 4096 ...]``. Prints, per layer
count, the bytes ``tracemalloc`` sees allocated by ``ModelSpec.from_hf_config`` plus
``EstimateContext`` for a uniform Llama-shaped config (one layer kind), and the count of layer
runs. Run it on two checkouts to compare (layer lists vs runs).
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc

from deepstack import switch_noc

from plena_opt.estimate import Workload
from plena_opt.estimate.distributed import EstimateContext
from plena_opt.memory import unbounded
from plena_opt.models import ModelSpec, builtin_config


def measure(layers: int) -> dict:
    cfg = {**builtin_config("llama-3.1-8b"), "num_hidden_layers": layers}
    noc, mem, work = switch_noc(1), unbounded(), Workload(batch_size=1)
    EstimateContext(ModelSpec.from_hf_config(cfg, "warm"), noc, mem, work)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    spec = ModelSpec.from_hf_config(cfg, "m")
    ctx = EstimateContext(spec, noc, mem, work)
    ctx.stage_kind_counts(1)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    runs = len(getattr(spec, "layer_runs", ())) or None
    return {"layers": layers, "bytes": held, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[64, 4096])
    args = parser.parse_args()
    print(json.dumps([measure(n) for n in args.layers], indent=2))


if __name__ == "__main__":
    main()
