"""`python -m sglang.check_env` (stand-in): versions, GPUs and topology like SGLang's, plus the NCCL wheel."""

import importlib.metadata
import os
import subprocess
import sys

from sglang._twin.config import load_twin


def main() -> int:
    twin = load_twin()
    hw = twin["hardware"]
    ids = ",".join(str(i) for i in range(hw["gpu_count"]))
    print(f"Python: {sys.version}")
    print("CUDA available: True")
    print(f"GPU {ids}: {hw['gpu_name']}")
    print(f"GPU {ids} Compute Capability: {hw['compute_capability']}")
    print("CUDA_HOME: /usr/local/cuda")
    print(f"NVCC: Cuda compilation tools, release {hw['cuda']}, V{hw['cuda']}.88")
    print(f"CUDA Driver Version: {hw['driver']}")
    print(f"PyTorch: {hw.get('torch', '2.9.1+cu129')}")
    for pkg in ("sglang", "nvidia-nccl-cu12"):
        try:
            print(f"{pkg}: {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            print(f"{pkg}: Module Not Found")
    print("NVIDIA Topology: ")
    sys.stdout.flush()
    subprocess.run(["nvidia-smi", "topo", "-m"], env=os.environ, check=False)
    print("ulimit soft: 1048576")
    return 0


if __name__ == "__main__":
    sys.exit(main())
