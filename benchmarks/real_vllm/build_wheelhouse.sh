#!/usr/bin/env bash
# Builds the vLLM 0.26.0 wheelhouse for the lent GPU (docs/real-gpu.md, "vLLM"): pinned, kept out of git
# (.whl-vllm/ is ignored), then cut into pieces that each travel in one device call beside the checkout.
#   house/part1/  _C_stable_libtorch.abi3.so as xz (hard import: vllm/platforms/cuda.py:23) + SHA256SUMS
#   house/part2/  the trimmed vllm wheel without that .so (the Python package, _vllm_fa3_C for Hopper) + the deps
#                 the image lacks (its package list: image-packages.txt, from .library/device/KINDS.md)
#   house/sd/     specdoctor's own dependencies (../real_sglang/sd_wheels.sh); sd/shared.txt names those part2 has
#   call1/ call2/ …  house.tar cut into pieces of PIECE_MIB (default 44) — 64 MiB a call less the checkout
#                 (≈ 14 MB) and a margin. Each call carries one (`carry: [".whl-vllm/callN"]`) and copies it to
#                 /root/vllmwh (a warm machine keeps /root between calls; a carried path not named again is gone);
#                 run_device.sh joins them (`cat house.tar.* | tar -x`) once all have come (MANIFEST: count, sha256).
# Left out, from vLLM's own source: vllm_flash_attn/_vllm_fa2_C (the FA3 build alone makes vllm.vllm_flash_attn
# importable on sm90: vllm_flash_attn/__init__.py:33 needs FA2 *or* FA3), _moe_C_stable_libtorch and _qutlass_C
# (optional: cuda.py:227-231 suppress their ImportError; a dense Llama calls no MoE op), vllm-rs (the Rust front end,
# only with VLLM_RUST_FRONTEND_PATH: envs.py:571), _flashmla_C (MLA models), third_party/{deep_gemm,fmha_sm100} (found
# by importlib.util.find_spec, absent = off). third_party/ itself stays: utils/import_utils.py:53 imports its pynvml.
# Proven on the CPU machine by prove_on_cpu.sh (imports, parser, engine config; report .whl-vllm/cpu-check.json).
# Usage: bash benchmarks/real_vllm/build_wheelhouse.sh [OUTDIR]   (default: .whl-vllm at the repository root)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$(cd "$HERE/../.." && pwd)/.whl-vllm}
PIECE=$(( ${PIECE_MIB:-44} * 1024 * 1024 ))
rm -rf "$OUT"
WORK=$(mktemp -d /tmp/vllmwh.XXXX)
H="$OUT/house"
mkdir -p "$H/part1" "$H/part2" "$H/sd"
# glibc tags up to 2.35: the image's is newer, the CPU machine's (2.36) installs them too for the proof
PLAT="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
 --platform manylinux_2_24_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_31_x86_64 \
 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64"
dl() { python3 -m pip download $PLAT -d "$WORK/dl" "$@" 2>&1 | grep -E "Saved|ERROR" || true; }  # many at once
python3 -m pip install -q wheel >/dev/null 2>&1 || true

python3 -m pip download --no-deps -d "$WORK/big" vllm==0.26.0 2>&1 | grep -E "Saved|ERROR" || true
python3 -m wheel unpack -d "$WORK/unp" "$WORK"/big/vllm-0.26.0-*.whl
V="$WORK/unp/vllm-0.26.0"
rm -f "$V"/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so "$V"/vllm/_moe_C_stable_libtorch.abi3.so \
      "$V"/vllm/_qutlass_C.abi3.so "$V"/vllm/_flashmla_C.abi3.so "$V"/vllm/vllm-rs
rm -rf "$V"/vllm/third_party/deep_gemm "$V"/vllm/third_party/fmha_sm100
# part1: the kernel library alone, xz-compressed (decompressed into the installed package on the machine)
xz -6 -T2 -c "$V"/vllm/_C_stable_libtorch.abi3.so > "$H/part1/_C_stable_libtorch.abi3.so.xz"
( cd "$V" && sha256sum vllm/_C_stable_libtorch.abi3.so ) > "$H/part1/SHA256SUMS"
rm -f "$V"/vllm/_C_stable_libtorch.abi3.so
python3 -m wheel pack -d "$H/part2" "$V"

# Dependencies vLLM 0.26 declares that the image lacks (one version each); those only some code paths import are
# left for the first real start to name (see docs/real-gpu.md).
# The CPU proof (prove_on_cpu.sh) found: llguidance imported at start-up (v1/structured_output/backend_guidance.py:143,
# a class body), xgrammar (backend_xgrammar.py:136, likewise; 0.2.7 takes vLLM's apache-tvm-ffi pin 0.1.10),
# model-hosting-container-standards + jmespath (imported by entrypoints/openai/api_server.py) and an openai with
# openai.types.responses.NamespaceTool (tool_parsers/utils.py:13; 2.6.1 lacks it).
DEPS="fastapi==0.136.1 starlette==1.0.1 uvicorn==0.54.0 pydantic==2.14.4 pydantic-core==2.50.5
  annotated-types==0.8.0 typing-inspection==0.4.5 openai==2.54.0 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1
  prometheus-fastapi-instrumentator==8.0.0 msgspec==0.23.0 pyzmq==27.3.0 blake3==1.0.8 cbor2==5.7.1
  pybase64==1.5.1 setproctitle==1.3.8 partial-json-parser==0.2.1.1.post7 cachetools==6.2.4 ijson==3.4.0
  python-json-logger==4.0.0 watchfiles==1.1.1 python-multipart==0.0.34 depyf==0.20.0 astor==0.8.1 dill==0.4.1
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  lark==1.2.2 gguf==0.19.0 compressed-tensors==0.17.0 openai-harmony==0.0.8 llguidance==1.7.6
  xgrammar==0.2.7 apache-tvm-ffi==0.1.10 model-hosting-container-standards==0.1.16 jmespath==1.1.0 ${VLLM_EXTRA_WHEELS:-}"
# shellcheck disable=SC2086
dl $DEPS
cp "$WORK"/dl/*.whl "$H/part2/" 2>/dev/null || true
got=$(ls "$WORK"/dl/*.whl 2>/dev/null | wc -l); want=$(echo $DEPS | wc -w)
[ "$got" -eq "$want" ] || { echo "ERROR: $got of $want dependency wheels (one bad pin fails the whole download)" >&2; exit 1; }

# specdoctor's own venv (/root/sd): the same list as the SGLang builder's; orjson, zstandard and typing-extensions
# too, which the SGLang set shares with it and this one does not carry
# shellcheck source=../real_sglang/sd_wheels.sh
source "$HERE/../real_sglang/sd_wheels.sh"
SD_WHEELS="$SD_WHEELS orjson==3.13.0 zstandard==0.25.0 typing-extensions==4.16.0"
sd_wheels "$H/sd" "$WORK/sd" $PLAT
sd_shared "$H/part2" "$H/sd"

# the pieces: one tar of the house, cut; each piece travels in its own consecutive call
tar -C "$OUT" -cf "$WORK/house.tar" house
n=0
split -b "$PIECE" -d -a 1 "$WORK/house.tar" "$WORK/house.tar."
for piece in "$WORK"/house.tar.*; do
  n=$((n + 1)); mkdir -p "$OUT/call$n"; mv "$piece" "$OUT/call$n/"
done
{ echo "pieces $n"; ( cd "$WORK" && sha256sum house.tar ); } > "$OUT/MANIFEST"
cp "$OUT/MANIFEST" "$OUT/call$n/"
for d in "$OUT"/call*; do echo "$(basename "$d"): $(du -sb "$d" | cut -f1) bytes"; done
echo "house: $(du -sb "$H" | cut -f1) bytes in $n pieces of at most $PIECE bytes"
rm -rf "$WORK"
