"""Parse exported commands with the serving engines' own argument parsers.

Run by ``tests/export/test_export_engine_parsers.py`` with the Python of the engine environment that
``.ci/engine_parsers.sh`` makes: vLLM, SGLang and sglang-router wheels installed without their
dependencies, plus the few small pure packages their parsers need for real (pydantic, msgspec,
regex, PyYAML, packaging). Every other import (torch, transformers, numpy, triton, …) is answered
by a fake module here, which is enough to build the parsers: they are declared from config
dataclasses and never touch a tensor. The engine packages themselves are never faked, except the
few submodules that register GPU kernels at import time and are reached only through validation
hooks (``STUB_INSIDE``); argument parsing never calls them.

stdin: a JSON list of argument vectors (``["vllm", "serve", MODEL, ...]``). stdout: a JSON list,
one ``{"ok": bool, "error": str}`` per vector, then ``versions``. Imports nothing of plena_opt.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import importlib.abc
import importlib.machinery
import importlib.metadata as metadata
import io
import json
import os
import sys
import types

ENGINES = ("vllm", "sglang", "sglang_router")
STUB_INSIDE = (
    "vllm.ir",
    "vllm.v1.executor",
    "vllm.v1.worker",
    "vllm.lora",
    "sglang.kernels",
    "sglang.srt.distributed",
    "sglang.srt.layers",
)
# accelerators probed with hasattr(torch, …): a fake torch has none of them
ABSENT_ATTRIBUTES = frozenset({"npu", "hpu", "musa", "mlu"})
TORCH_VERSION = "2.14.0"  # vLLM 0.34.0's pin (its METADATA: torch==2.14.0)


class _Meta(abc.ABCMeta):
    """A fake class: any attribute is another fake class, calling it decorates or builds."""

    def __getattr__(cls, name: str):
        if name == "__class_validators__":
            return []
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _fake(name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator
        if not args and kwargs:
            return lambda f: f  # a decorator factory
        return type.__call__(cls)

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, key, value):
        pass

    def register(cls, *args, **kwargs):  # transformers' Auto*.register(config, cls)
        return args[-1] if args else None

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __eq__(cls, other):
        return other is cls or isinstance(other, (int, float, str, _Meta))

    def __hash__(cls):
        return id(cls)

    def __lt__(cls, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __int__(cls):
        return 1

    __index__ = __int__

    def __float__(cls):
        return 1.0

    def __add__(cls, other):
        return cls

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = __add__


class _Fake(metaclass=_Meta):
    def __init_subclass__(cls, **kwargs):
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _fake(name)

    def __call__(self, *args, **kwargs):
        return _fake("result")()

    def __getitem__(self, item):
        return self

    def __setitem__(self, key, value):
        pass

    def __bool__(self):
        return False  # torch.cuda.is_available() and its kind answer no

    def __contains__(self, item):
        return False

    def __iter__(self):
        return iter(())

    def __eq__(self, other):
        return other is self or isinstance(other, (int, float, str, _Fake, _Meta))

    def __hash__(self):
        return id(self)

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __int__(self):
        return 1

    __index__ = __int__

    def __float__(self):
        return 1.0

    def __add__(self, other):
        return self

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = __add__


def _fake(name: str) -> type:
    return _Meta(name, (_Fake,), {"__module__": "fake"})


class _FakeModule(types.ModuleType):
    __version__ = "99.0.0"

    def __getattr__(self, name: str):
        if name in ABSENT_ATTRIBUTES or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        value = _fake(name)
        setattr(self, name, value)
        return value


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _FakeModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


class _Missing(importlib.abc.MetaPathFinder):
    """Last on the path: an import nothing installed answers gets a fake module."""

    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in ENGINES or top in sys.stdlib_module_names or top.startswith("_"):
            return None
        if "." in name and not isinstance(sys.modules.get(top), _FakeModule):
            return None  # a submodule of an installed package is never faked
        return importlib.machinery.ModuleSpec(name, _Loader(), is_package=True)


class _Inside(importlib.abc.MetaPathFinder):
    """First on the path: the engine submodules that register GPU kernels at import."""

    def find_spec(self, name, path, target=None):
        if any(name == p or name.startswith(p + ".") for p in STUB_INSIDE):
            return importlib.machinery.ModuleSpec(name, _Loader(), is_package=True)
        return None


def install_fakes() -> None:
    sys.meta_path.insert(0, _Inside())
    sys.meta_path.append(_Missing())
    real_version = metadata.version

    def version(name: str) -> str:
        try:
            return real_version(name)
        except metadata.PackageNotFoundError:
            return TORCH_VERSION if name == "torch" else "99.0.0"

    metadata.version = version
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # faked accelerator probes would all answer


class ParseError(Exception):
    pass


def _raise(self, message):
    raise ParseError(f"{self.prog}: {message}")


class _Parsed(Exception):
    pass


def _vllm_serve(args: list[str]) -> None:
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(args)


def _vllm_bench(args: list[str]) -> None:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    parser.parse_args(args)


def _sglang_server(args: list[str]) -> None:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    parser.parse_args(args)


def _sglang_bench(args: list[str]) -> None:
    """``cli_main`` builds its parser inline: parse, then stop before it runs anything."""
    import sglang.benchmark.serving as serving

    class Stop(argparse.ArgumentParser):
        def parse_args(self, *a, **k):
            super().parse_args(*a, **k)
            raise _Parsed

    serving.ArgumentParser = Stop
    sys.argv = ["sglang.benchmark.serving", *args]
    with contextlib.suppress(_Parsed):
        serving.cli_main()


def _router(args: list[str]) -> None:
    from sglang_router.launch_router import parse_router_args

    parse_router_args(args)


PREFIXES = (
    (("vllm", "serve"), _vllm_serve),
    (("vllm", "bench", "serve"), _vllm_bench),
    (("python", "-m", "sglang.launch_server"), _sglang_server),
    (("python", "-m", "sglang.benchmark.serving"), _sglang_bench),
    (("python", "-m", "sglang_router.launch_router"), _router),
)


def check(argv: list[str]) -> dict:
    """Parse one vector with the parser its program prefix names."""
    for prefix, parse in sorted(PREFIXES, key=lambda p: -len(p[0])):
        if tuple(argv[: len(prefix)]) == prefix:
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    parse(argv[len(prefix) :])
            except ParseError as exc:
                return {"ok": False, "error": str(exc)}
            except SystemExit as exc:
                return {"ok": False, "error": f"exit {exc.code}: {err.getvalue()[-500:]}"}
            return {"ok": True, "error": ""}
    return {"ok": False, "error": f"no parser for {argv[:3]}"}


def main() -> int:
    install_fakes()
    argparse.ArgumentParser.error = _raise
    vectors = json.load(sys.stdin)
    results = [check(v) for v in vectors]
    versions = {e: metadata.version(e.replace("_", "-")) for e in ENGINES}
    json.dump({"results": results, "versions": versions}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
