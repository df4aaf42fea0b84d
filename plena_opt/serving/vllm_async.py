"""Whether a vLLM server runs async (overlap) scheduling, from its version and pipeline stages.

vLLM's async scheduling (``--async-scheduling``, ``SchedulerConfig.async_scheduling``) prepares
the next step while this one runs: ``EngineModel.overlap_schedule``. Its default is the engine
version's, read from each release's wheel (PyPI) ``vllm/config/scheduler.py`` and
``vllm/config/vllm.py`` (``VllmConfig`` resolving ``async_scheduling``):

* 0.11.2, 0.12.0, 0.13.0: ``async_scheduling: bool = False`` (off unless the flag is passed);
  the v0.11.1 release notes only expected it to become the default "in the next release".
* 0.14.0: the default became ``None``, resolved to on ("Async scheduling is now enabled by
  default", v0.14.0 release notes, Breaking Changes; vllm-project/vllm#27614), except with
  ``pipeline_parallel_size > 1`` (resolved off; passing the flag with PP raises "not yet
  compatible with pipeline_parallel_size > 1"), non-EAGLE/MTP speculative decoding and
  executors without support (the notes: "Excludes ... pipeline parallel, CPU backend,
  non-MTP/Eagle spec decoding").
* 0.15.0 (and 0.15.1, 0.16.0, 0.34.0): the pipeline-parallel exclusion is gone from both
  branches (vllm-project/vllm#32359 "Support async scheduling + PP", #32618): on by default at
  any ``pp`` (0.34.0: ``VllmConfig.max_concurrent_batches`` is then ``pp + 1``).

Not modelled here, each named where it matters: pooling models (off by default from 0.14), the
Ray executor (``Executor.supports_async_scheduling`` False through 0.34.0; the exported launch
commands use the default ``mp`` executor, ``--nnodes`` across nodes), speculative decoding
(``serving.speculative``). Pre-release versions (``rc``, ``dev``) are refused: which side of a
change a pre-release sits on is not established.
"""

from __future__ import annotations

import re

from plena_opt.errors import PlenaInputError

# first release whose SchedulerConfig.async_scheduling defaults to on (None resolved to True)
ASYNC_DEFAULT_FROM = (0, 14, 0)
# first release that runs async scheduling with pipeline_parallel_size > 1 (default or flag)
ASYNC_WITH_PP_FROM = (0, 15, 0)
# a release: N.N[.N] with an optional .postN and local +label (PEP 440 public release forms)
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.post\d+)?(?:\+[0-9A-Za-z.]+)?$")


def vllm_version(text: str, field: str = "backend_version") -> tuple[int, int, int]:
    """(major, minor, patch) of a vLLM release string such as ``0.15.1`` or ``v0.11.2``;
    anything else (empty, a pre-release, not a version) raises naming ``field``."""
    m = _RELEASE.match(text.strip())
    if m is None:
        raise PlenaInputError(field, f"{field} {text!r} is not a vLLM release (N.N.N, e.g. "
                              "0.15.1; pre-releases are refused: their async-scheduling default "
                              "is not established)")  # fmt: skip
    return int(m[1]), int(m[2]), int(m[3] or 0)


def vllm_async_default(version: str, pp: int = 1, field: str = "backend_version") -> bool:
    """Whether vLLM ``version`` runs async scheduling by default with ``pp`` pipeline stages
    (module docstring: off before 0.14.0; 0.14.x on at pp 1 only; on from 0.15.0)."""
    if pp < 1:
        raise PlenaInputError("pp", f"must be at least 1; got {pp}")
    v = vllm_version(version, field)
    if v < ASYNC_DEFAULT_FROM:
        return False
    return pp == 1 or v >= ASYNC_WITH_PP_FROM


def vllm_async(version: str | None, pp: int, flag: bool, field: str = "backend_version") -> bool:
    """Whether a vLLM server of ``version`` (None: not recorded) with ``pp`` stages ran async
    scheduling, ``flag``: its launch passed ``--async-scheduling``. Raises naming ``field`` when
    the answer depends on a version not recorded, or when that version refuses the flag with PP."""
    if flag:
        if pp == 1:
            return True  # honoured at pp 1 (the InferenceX rows ran it on 0.10.2 and 0.11.2)
        if version is None:
            raise PlenaInputError(field, f"{field} not recorded: --async-scheduling with pp "
                                  f"{pp} runs from vLLM 0.15.0 and raises before it")  # fmt: skip
        if vllm_version(version, field) < ASYNC_WITH_PP_FROM:
            why = "not yet compatible with pipeline_parallel_size > 1"
            raise PlenaInputError(field, f"{field} {version}: vLLM refuses --async-scheduling "
                                  f"with pp {pp} ({why})")  # fmt: skip
        return True
    if version is None:
        raise PlenaInputError(field, f"{field} not recorded: vLLM's async-scheduling default "
                              "changed at 0.14.0 (off before, on from)")  # fmt: skip
    return vllm_async_default(version, pp, field)
