"""``plena-opt models``: list the built-in decoder models, or show one model's parsed spec."""

from __future__ import annotations

import argparse
from typing import Any

from plena_opt import jsonio
from plena_opt.api.catalog import (
    HbmStoragePrecision,
    ModelSpec,
    architecture,
    count_parameters,
    list_models,
    load_model,
    model_info,
    show_fields,
)
from plena_opt.cli.commands import help_of
from plena_opt.errors import PlenaInputError

_COLUMNS = (
    ("name", "name"),
    ("family", "family"),
    ("layers", "layers"),
    ("hidden", "hidden_size"),
    ("heads/kv", "heads_kv"),
    ("head_dim", "head_dim"),
    ("experts/top-k", "experts_topk"),
    ("vocab", "vocab_size"),
    ("attn", "attention_kind"),
    ("params B (active)", "params"),
    ("source", "origin"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``models`` subcommand (and its ``show`` action) to the ``plena-opt`` parser."""
    parser = subparsers.add_parser(
        "models",
        help=help_of("models"),
        description="List the built-in decoder models, or show one with 'models show'.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--model-path",
        help="show this Hugging Face model directory or config.json instead of listing "
        "(as 'show'; default: list the catalog)",
    )
    parser.set_defaults(func=_list_handler)
    actions = parser.add_subparsers(
        dest="models_action", metavar="{show}", help="show: one model's parsed hyper-parameters"
    )
    show = actions.add_parser(
        "show",
        help="show one model's parsed hyper-parameters",
        description="Show a built-in model (NAME) or any Hugging Face config.json (--model-path).",
    )
    show.add_argument("name", nargs="?", help="built-in model name (see 'plena-opt models')")
    show.add_argument(
        "--model-path",
        help="a Hugging Face model directory or config.json instead of NAME (default: none)",
    )
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    show.set_defaults(func=_show_handler)


def model_row(spec: ModelSpec, info: dict[str, Any] | None = None) -> dict[str, Any]:
    """One catalog entry: ``describe()`` plus sizes and provenance (JSON-ready)."""
    row = spec.describe()
    counts = count_parameters(spec)
    row.update(
        attention_kind=spec.attention_kind,
        parameters_total=counts.total,
        parameters_active=counts.active,
    )
    row.update(
        intermediate_size=spec.intermediate_size,
        moe_intermediate_size=spec.moe_intermediate_size,
        vocab_size=spec.vocab_size,
        tie_word_embeddings=spec.tie_word_embeddings,
        sliding_window=spec.sliding_window,
    )
    if info is not None:
        row.update(
            source=info.get("source"),
            origin=info.get("origin"),
            external=bool(info.get("external")),
        )
        if info.get("note"):
            row["note"] = info["note"]
    return row


def _cells(row: dict[str, Any]) -> dict[str, str]:
    experts = f"{row['num_experts']}/{row['experts_per_token']}" if row["num_experts"] else "-"
    return {
        "name": row["name"],
        "family": row["family"],
        "layers": str(row["layers"]),
        "hidden_size": str(row["hidden_size"]),
        "heads_kv": f"{row['heads']}/{row['kv_heads']}",
        "head_dim": str(row["head_dim"]),
        "experts_topk": experts,
        "vocab_size": str(row["vocab_size"]),
        "attention_kind": row["attention_kind"],
        "params": f"{row['parameters_total'] / 1e9:.1f} ({row['parameters_active'] / 1e9:.1f})",
        "origin": row.get("origin", "file"),
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    """Plain-text table of catalog rows (one model per line)."""
    cells = [_cells(r) for r in rows]
    widths = {key: max([len(title)] + [len(c[key]) for c in cells]) for title, key in _COLUMNS}
    lines = ["  ".join(title.ljust(widths[key]) for title, key in _COLUMNS).rstrip()]
    for c in cells:
        lines.append("  ".join(c[key].ljust(widths[key]) for _, key in _COLUMNS).rstrip())
    return "\n".join(lines)


def _list_handler(args: argparse.Namespace) -> int:
    if args.model_path is not None:
        args.name = None
        return _show_handler(args)
    rows = [model_row(load_model(n), model_info(n)) for n in list_models()]
    if args.json:
        print(jsonio.dumps({"models": rows}, indent=2))
    else:
        print(format_table(rows))
    return 0


def _show_handler(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.model_path is None):
        raise PlenaInputError("model", "models show needs exactly one of NAME or --model-path")
    spec = load_model(name=args.name, path=args.model_path)
    info = model_info(args.name) if args.model_path is None else None
    detail = {**spec.model_dump(mode="json", exclude={"layer_runs"}), **model_row(spec, info)}
    detail.update(layer_types=list(spec.layer_types), mlp_types=list(spec.mlp_types))
    arch = architecture(spec)
    kv_bytes = HbmStoragePrecision.default().kv_write_bytes
    arch["attention"]["kv_bytes_per_token_per_layer"] = (
        arch["attention"]["kv_elements_per_token_per_layer"] * kv_bytes
    )
    detail.update(arch)
    detail = show_fields(detail, spec)
    if getattr(args, "json", False):
        print(jsonio.dumps(detail, indent=2))
        return 0
    for key, value in detail.items():
        if key in ("layer_types", "mlp_types"):
            value = _runs(value)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        print(f"{key + ':':24} {value}")
    return 0


def _runs(values: list[str]) -> str:
    """Compact a per-layer list: ``['a', 'a', 'b']`` → ``a×2, b`` (counts if it alternates)."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        out.append(values[i] if j - i == 1 else f"{values[i]}×{j - i}")
        i = j
    if len(out) > 4:
        counts = {v: values.count(v) for v in dict.fromkeys(values)}
        summary = ", ".join(f"{n} {v}" for v, n in counts.items())
        return f"{summary} (layer 0: {values[0]})"
    return ", ".join(out)
