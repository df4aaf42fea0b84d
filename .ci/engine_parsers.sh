#!/usr/bin/env bash
# The engines' own argument parsers for tests/export/test_export_engine_parsers.py: a throwaway virtual
# environment with the vLLM, SGLang and sglang-router wheels installed WITHOUT their dependencies
# (no torch, no CUDA: ~0.8 GB on disk, about a minute to install on a fast link), plus the few
# small pure packages their parsers need for real. Every other import is faked by
# tests/engine_parsers/check.py. The versions are the ones plena_opt/export/engines.json is
# written for (the test checks that they agree).
# Usage: bash .ci/engine_parsers.sh DIR   then   export PLENA_OPT_ENGINE_VENV=DIR
set -euo pipefail
dir="${1:?usage: engine_parsers.sh VENV_DIR}"
python3 -m venv "$dir"
pip=("$dir/bin/python" -m pip install --quiet --no-cache-dir --no-deps)
"${pip[@]}" vllm==0.34.0 sglang==0.5.23 sglang-router==0.3.2
"${pip[@]}" pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
    typing-extensions==4.16.0 typing-inspection==0.4.5 msgspec regex pyyaml packaging dill
# The compiled kernels are never loaded (their imports are faked): drop them to save disk.
find "$dir/lib" -path '*site-packages/vllm*' -name '*.so' -delete
find "$dir/lib" -path '*site-packages/sglang/*' -name '*.so' -delete
