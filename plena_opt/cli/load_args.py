"""The estimate's load flags read back, shared by local and remote mode: whether a serving
workload is asked for, the disaggregated pools, the checked speculative setting."""

from __future__ import annotations

import argparse

from plena_opt.errors import PlenaInputError


def resolve_batch(args: argparse.Namespace) -> int | None:
    """Fill ``estimate``'s unset ``--batch-size`` (C under ``--concurrency C``, else 16) and
    return the batch the running cap is priced with: the one given, C, or None (the engine's
    default: ``--request-rate`` without ``--batch-size``)."""
    batch, clients = args.batch_size, getattr(args, "concurrency", None)
    if batch is None and clients is not None and clients >= 1:  # a bad C is refused naming it
        batch = clients
    args.batch_size = 16 if batch is None else batch  # checked with the workload
    return batch


# the flags of a serving workload (load, engine version, lengths' range, KV pool share);
# ``--engine`` alone prices the static estimate with that engine's MoE kernels
LOAD_FLAGS = (
    "concurrency",
    "request_rate",
    "engine_version",
    "range_ratio",
    "memory_fraction",
)


def wants_load(args: argparse.Namespace) -> bool:
    """Whether any flag of a serving workload (``LOAD_FLAGS``) is given."""
    return any(getattr(args, k, None) is not None for k in LOAD_FLAGS)


def speculation_of_args(args: argparse.Namespace):  # noqa: ANN202
    """The checked speculative setting of the flags (None: no --speculative)."""
    from plena_opt.api.speculative import speculation

    k, method, rates = args.speculative, args.speculative_method, args.acceptance
    if k is None:
        if method is not None or rates is not None:
            flag = "--speculative-method" if method is not None else "--acceptance"
            raise PlenaInputError("speculative", f"{flag} needs --speculative K")
        return None
    if pools(args) is None and not wants_load(args):
        raise PlenaInputError(
            "speculative",
            "--speculative is priced under load: give --concurrency or --request-rate",
        )
    acceptance = None
    if rates is not None:
        try:
            acceptance = tuple(float(a) for a in rates.split(","))
        except ValueError:
            raise PlenaInputError(
                "acceptance", f"--acceptance takes comma-separated rates in (0, 1]; got {rates!r}"
            ) from None
    return speculation(method or "eagle", k, acceptance)


def pools(args: argparse.Namespace):  # noqa: ANN202
    """The pools of the four pool flags (None: none given); an error names a missing one."""
    from plena_opt.api.under_load_disagg import POOL_FIELDS, check_pools

    return check_pools({f: getattr(args, f, None) for f in POOL_FIELDS})


def print_under_load(args: argparse.Namespace, result, load, verdict) -> int:  # noqa: ANN001
    """Print an estimate with its figures under load and the speculative verdict (None: not
    asked), as text or in ``--json`` (keys ``serving_under_load``, ``speculative``); exit 0."""
    if args.json:
        result.document["serving_under_load"] = load.to_dict()
        if verdict is not None:
            result.document["speculative"] = verdict.to_dict()
        print(result.to_text(as_json=True))
        return 0
    print(result.to_text())
    print(load.to_text())
    if verdict is not None:
        print(verdict.to_text())
    return 0
