"""The CPU path cluster/sglang-cpu-x86/install.sh took, applied in every process of the CPU SGLang venv.

Installed into the venv's site-packages with a ``.pth`` line that imports it at interpreter start.
It acts only in a process that runs SGLang's CPU engine (``SGLANG_USE_CPU_ENGINE=1``, which every CPU
server's environment has), so pip and other tools of the venv are left alone:

- ``avx512-bf16``: SGLang decides "AMX or not" from ``torch.cpu._is_amx_tile_supported()`` alone; the
  claim of ``../shared/sglang-cpu/avx512/sitecustomize.py`` (copied here as ``sweep_amx_claim``)
  answers yes, and SGLang's intel_amx kernels run on the CPU's AVX512-BF16 instead.
- ``avx2``: PyTorch is held to AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``, unless already set), so a
  newer CPU behaves as a Zen 3 would; SGLang sees no AMX and uses torch_native.
- ``amx``: nothing to do.

``SWEEP_SGLANG_AMX=0`` in a server's environment makes SGLang see no AMX on any path (real AMX
included): it then serves with torch_native (taught speculation by the installer) and reduces TP over
gloo. That is what a server over several hosts needs: where SGLang sees AMX it sets ``LOCAL_SIZE`` to
the TP size and ``sgl_kernel.initialize`` waits for every rank's /dev/shm segment, which ranks on
other hosts never create (the server hangs after ``Init torch distributed begin.``).

The installer writes the path into ``CPU_PATH`` below.
"""

import os

CPU_PATH = "unset"

if os.environ.get("SGLANG_USE_CPU_ENGINE") == "1":
    if CPU_PATH == "avx2":  # before torch is imported
        os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    if os.environ.get("SWEEP_SGLANG_AMX") == "0":
        import torch

        torch.cpu._is_amx_tile_supported = lambda: False
    elif CPU_PATH == "avx512-bf16":
        import sweep_amx_claim  # noqa: F401  (imports torch and claims AMX)
