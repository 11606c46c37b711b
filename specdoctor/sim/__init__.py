"""The simulated GPU host (the twin): scenarios, sandbox, stand-in SGLang/nvidia-smi/nccl-tests."""
