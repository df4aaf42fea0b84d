"""The subcommands of ``plena-opt``: name → (module that registers it, one-line help).

``plena-opt --help`` lists them from this table alone, so it imports none of the subcommand
modules (nor scipy, the simulator or the server); only the chosen subcommand's module is loaded.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "search": Command("plena_opt.cli.search_cmd", "find Pareto-optimal parallel plans"),
    "worker": Command(
        "plena_opt.cli.worker_cmd", "join a study's search as one worker (PostgreSQL store)"
    ),
    "storage-proxy": Command(
        "plena_opt.cli.worker_cmd", "run Optuna's gRPC storage proxy in front of an RDB store"
    ),
    "estimate": Command(
        "plena_opt.cli.estimate_cmd",
        "estimate one plan (single chip without --noc, distributed with it)",
    ),
    "simulate": Command(
        "plena_opt.cli.simulate_cmd",
        "Monte Carlo pipeline simulation of a plan or a training schedule",
    ),
    "models": Command("plena_opt.cli.models_cmd", "list built-in models"),
    "memory": Command(
        "plena_opt.cli.memory_cmd", "memory profiles (stacked DRAM, fixed bandwidth)"
    ),
    "describe-noc": Command(
        "plena_opt.cli.noc_cmd", "show a NoC profile's devices, levels and energy"
    ),
    "collective": Command("plena_opt.cli.noc_cmd", "price one collective on a NoC profile"),
    "studies": Command(
        "plena_opt.cli.studies_cmd", "list the studies in a store, or repair a damaged journal"
    ),
    "dashboard": Command("plena_opt.cli.studies_cmd", "open optuna-dashboard on the study store"),
    "export": Command(
        "plena_opt.cli.export_cmd", "launch files of a plan for vLLM, SGLang or TensorRT-LLM"
    ),
    "serve": Command("plena_opt.cli.serve_cmd", "run the plena-opt gRPC server"),
    "validate": Command(
        "plena_opt.cli.validate_cmd",
        "score the model against shipped public measurements (MAPE per dataset and model)",
    ),
    "calibrate": Command(
        "plena_opt.cli.calibrate_cmd",
        "fit the serving constants to your own benchmark results (a --calibration overlay)",
    ),
    "capacity": Command(
        "plena_opt.cli.capacity_cmd",
        "replicas and $ per day of the cheapest deployment serving a load curve within an SLA",
    ),
    "ui": Command("plena_opt.cli.ui_cmd", "open the pipeline simulator's web UI (local web app)"),
}


def help_of(name: str) -> str:
    return COMMANDS[name].help
