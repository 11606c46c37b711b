import platform, sys
print('python', platform.python_version())
try:
 import torch
 print('torch', torch.__version__)
 print('torch_cuda', torch.version.cuda)
 v = torch.cuda.nccl.version()
 print('nccl', '.'.join(map(str, v)) if isinstance(v, tuple) else '%d.%d.%d' % (v // 1000, v // 100 % 10, v % 100) if v < 10000 else '%d.%d.%d' % (v // 10000, v // 100 % 100, v % 100))
except Exception as e:
 print('torch_error', type(e).__name__)
import importlib, os
e = os.environ['SD_ENGINE']
try:
 print(e, importlib.import_module(e).__version__)
except Exception as x:
 print(e + '_error', type(x).__name__)
try:
 import importlib.metadata as m
 print('nccl_pip', m.version('nvidia-nccl-cu12'))
except Exception:
 pass
