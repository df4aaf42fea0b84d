"""``search --export-dir``: launch files of the top front plans, one folder per plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import Plan
from plena_opt.export.launch import LaunchConfig, export_plan

ENGINE_NAMES = ("vllm", "sglang")


def _plan(d: dict[str, Any]) -> Plan:
    return Plan(d["tp"], d["ep"], d["dp"], d["pp"], d["cp"], d["moe_tp_mode"], d["comm_overlap"])


def _write(folder: Path, launches: list[LaunchConfig]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in launches:
        path = folder / f"{c.engine}-{c.role or 'serve'}.sh"
        path.write_text(c.script())
        paths.append(str(path))
    doc = folder / "launch.json"
    doc.write_text(json.dumps([c.to_dict() for c in launches], indent=2) + "\n")
    return [*paths, str(doc)]


def write_exports(
    result: Any,
    folder: str | Path,
    *,
    top_k: int,
    model: str,
    max_len: int,
    memory_fraction: float,
    precision: str | None = None,
    kv_precision: str | None = None,
) -> list[str]:
    """Launch files of the first ``top_k`` front plans (and of the disaggregated front's, one
    file per pool); returns the paths written. A plan's own ``precision`` (a searched format)
    takes the place of ``precision``; the KV cache is in ``kv_precision``."""
    root = Path(folder)
    kw: dict[str, Any] = {"model": model, "max_len": max_len, "memory_fraction": memory_fraction}
    kw["kv_precision"] = kv_precision
    written: list[str] = []
    try:
        for i, e in enumerate(result.front[:top_k]):
            plan = _plan(e.plan)
            batch = e.plan["batch_size"]
            prec = e.plan.get("precision", precision)
            launches = [export_plan(n, plan, batch, precision=prec, **kw) for n in ENGINE_NAMES]
            written += _write(root / f"plan{i}", launches)
        dis = result.serving.get("comparison", {}).get("disaggregated", {}).get("front", [])
        for i, e in enumerate(dis[:top_k]):
            launches = []
            for role in ("prefill", "decode"):
                pool = e[role]
                for n in ENGINE_NAMES:
                    launches.append(
                        export_plan(
                            n,
                            _plan(pool),
                            pool["batch_size"],
                            role=role,
                            workers=pool["workers"],
                            precision=pool.get("precision", precision),
                            **kw,
                        )
                    )
            written += _write(root / f"disaggregated{i}", launches)
    except OSError as exc:
        raise PlenaInputError("export_dir", f"--export-dir {folder}: {exc.strerror}") from None
    return written
