#!/usr/bin/env bash
# Builds the wheelhouse the real-GPU stories carry to the lent H200 (docs/real-gpu.md):
#   .whl/            a trimmed sglang 0.5.17 + sglang-kernel 0.4.5 + the deps the H200 image lacks (one version each),
#   .whl/stubs/      stub `flashinfer`, `deep_gemm`, `IPython` packages (source folders),
#   .whl/sd/         specdoctor's own dependencies that the image lacks (paramiko and its crypto stack left out:
#                    the stories run `--host local`; shared wheels are listed in .whl/sd/shared.txt, not copied).
# Pinned versions, kept out of git (.whl/ is in .gitignore). Run on the CPU machine (x86-64, PyPI reachable);
# nothing here needs a GPU. ~60 MB in all; the device tool carries at most 64 MiB with the working tree.
# Usage: bash benchmarks/real_sglang/build_wheelhouse.sh [OUTDIR]   (default: .whl at the repository root)
set -euo pipefail
OUT=${1:-$(cd "$(dirname "$0")/../.." && pwd)/.whl}
rm -rf "$OUT"
WORK=$(mktemp -d /tmp/whbuild.XXXX)
mkdir -p "$OUT"
PLAT="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
 --platform manylinux_2_24_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_31_x86_64 \
 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64"
dl() { local d=$1; shift; python3 -m pip download $PLAT -d "$WORK/$d" "$@" 2>&1 | grep -E "Saved|ERROR" || true; }

# 1. the two big ones, trimmed and repacked (the `wheel` tool regenerates RECORD)
python3 -m pip install -q wheel >/dev/null 2>&1 || true
dl big sglang==0.5.17
dl big sglang-kernel==0.4.5
mkdir -p "$WORK/unp"
python3 -m wheel unpack -d "$WORK/unp" "$WORK"/big/sglang-0.5.17-*.whl
S="$WORK/unp/sglang-0.5.17"
rm -f "$S"/sglang/srt/grpc/_core*.so "$S"/sglang/srt/multimodal/_core*.so "$S"/sglang/srt/server/_core*.so  # Rust ext., only for SGLANG_RUST_SERVER / --grpc-port
rm -rf "$S"/sglang/multimodal_gen                                                                            # diffusion, not used by launch_server
# transformers 5.17 (remote) already defines model_type qwen3_asr; sglang 0.5.17 (pinned to 5.12.1)
# registers its own at import time of sglang.srt.configs and dies with ValueError: allow the overwrite.
sed -i 's/^AutoConfig.register("qwen3_asr", Qwen3ASRConfig)$/AutoConfig.register("qwen3_asr", Qwen3ASRConfig, exist_ok=True)/; s/^AutoConfig.register("qwen3_asr_thinker", Qwen3ASRThinkerConfig)$/AutoConfig.register("qwen3_asr_thinker", Qwen3ASRThinkerConfig, exist_ok=True)/' "$S"/sglang/srt/configs/qwen3_asr.py
grep -c "exist_ok=True" "$S"/sglang/srt/configs/qwen3_asr.py
python3 -m wheel pack -d "$OUT" "$S"
python3 -m wheel unpack -d "$WORK/unp" "$WORK"/big/sglang_kernel-0.4.5-*.whl
K="$WORK/unp/sglang_kernel-0.4.5"
rm -f "$K"/sgl_kernel/flash_ops.abi3.so "$K"/sgl_kernel/infllm_ops*.so "$K"/sgl_kernel/flashmla_ops.abi3.so  # FA3 / InfLLM / FlashMLA: 1.17 GB unpacked
rm -rf "$K"/sgl_kernel/sm100                                                                                 # Blackwell build; H200 loads sm90/
python3 -m wheel pack -d "$OUT" "$K"

# 2. deps missing on the remote image (KINDS.md list); one version each
for p in fastapi==0.140.0 starlette==1.10.0 uvicorn==0.54.0 pydantic==2.14.4 pydantic-core==2.50.5 \
  annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 orjson==3.13.0 msgspec==0.23.0 \
  pyzmq==27.3.0 pybase64==1.5.1 setproctitle==1.3.8 partial_json_parser==0.2.1.1.post7 openai==2.6.1 \
  jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 dill==0.4.1 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 \
  referencing==0.37.0 rpds-py==2026.9.1 zstandard==0.25.0 soundfile==0.14.0 cffi==2.1.1 pycparser==3.12 \
  gguf==0.19.0 python-multipart==0.0.34 interegular==0.3.3 blobfile==3.3.0 pycryptodomex==3.24.2 easydict==1.14 \
  compressed-tensors==0.20.1 loguru==0.7.3 apache-tvm-ffi==0.1.11 xgrammar==0.2.7 ; do dl dl "$p"; done
cp "$WORK"/dl/*.whl "$OUT"/ 2>/dev/null || true
ls "$OUT"

# 3. stubs (plain source dirs, put on PYTHONPATH on the remote)
mkdir -p "$OUT/stubs/flashinfer" "$OUT/stubs/IPython"
cat > "$OUT/stubs/flashinfer/_stubmod.py" <<'PY'
def _unavailable(modname, name):
    def f(*a, **k):
        raise NotImplementedError(f"flashinfer stub: {modname}.{name} is not available")
    f.__name__ = name
    return f


def make_getattr(modname):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _unavailable(modname, name)
    return __getattr__
PY
cat > "$OUT/stubs/flashinfer/__init__.py" <<'PY'
# Stub flashinfer for sglang 0.5.17 on a machine without flashinfer.
# sglang imports some flashinfer names unconditionally when CUDA is present (layers/sampler.py:
# flashinfer.sampling; layers/quantization/fp8_utils.py: `from flashinfer import bmm_fp8`;
# layers/attention/vision.py: flashinfer.prefill). Everything else is gated by
# is_flashinfer_available(), which SGLANG_IS_FLASHINFER_AVAILABLE=false turns off.
# Any name of this package or of its stub submodules imports as a function that raises;
# submodules without a file here do not exist, so `try: from flashinfer.x import y` /
# `except ImportError` blocks still take their fallback.
from flashinfer._stubmod import make_getattr as _mg

__version__ = "0.0.0+stub"
__getattr__ = _mg("flashinfer")
PY
# submodules that sglang 0.5.17 imports unconditionally on CUDA (found by import emulation)
for sm in sampling prefill; do printf 'from flashinfer._stubmod import make_getattr as _mg\n__getattr__ = _mg("flashinfer.%s")\n' $sm > "$OUT/stubs/flashinfer/$sm.py"; done
mkdir -p "$OUT/stubs/deep_gemm"
cat > "$OUT/stubs/deep_gemm/__init__.py" <<'PY'
# Stub deep_gemm (sgl-deep-gemm is not installed). sglang 0.5.17's eagle_worker_v2._capture_cuda_graphs
# imports layers/attention/dsa_backend.py (DeepSeek sparse attention) just to list graph-capable
# backend classes, and that module does `import deep_gemm` at top level on CUDA.
# Any attribute is a function that raises; nothing on the Llama/EAGLE-3 path calls it.
__version__ = "0.0.0+stub"


def _unavailable(name):
    def f(*a, **k):
        raise NotImplementedError(f"deep_gemm stub: deep_gemm.{name} is not available")
    f.__name__ = name
    return f


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _unavailable(name)
PY
cat > "$OUT/stubs/IPython/__init__.py" <<'PY'
# Stub: sglang/utils.py does `from IPython.display import HTML, display` at import time.
PY
cat > "$OUT/stubs/IPython/display.py" <<'PY'
class HTML(str):
    pass
def display(*a, **k):
    print(*a)
PY
# 4. specdoctor's own dependencies (sd_wheels.sh, shared with the vLLM builder); those the sglang set above
# already carries (same files: pydantic, starlette, ...) are listed in sd/shared.txt, not copied.
# shellcheck source=sd_wheels.sh
source "$(dirname "$0")/sd_wheels.sh"
sd_wheels "$OUT/sd" "$WORK/sd" $PLAT
sd_shared "$OUT" "$OUT/sd"
rm -rf "$WORK"
du -sh "$OUT"; du -ch "$OUT"/*.whl | tail -1
