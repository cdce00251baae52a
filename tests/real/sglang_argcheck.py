"""Run SGLang's own argument checks over cases, with its hardware probes answering for a named GPU.

Run by the python of an SGLang install (stdlib + sglang only), never imported by the project:

    SGLANG_PYTHON tests/real/sglang_argcheck.py GPU < cases.jsonl > verdicts.jsonl

GPU is one of ``GPUS`` (``cpu``: no CUDA at all). Each input line is ``{"id", "argv"}`` (the argv of
``launch_server`` without the launcher); each output line is ``{"id", "verdict": "error"|"ok",
"exception", "message", "steps", "topk", "draft", "max_running", "algorithm", "attention_backend",
"page_size", "draft_model_path", "device", "adaptive"}`` (adaptive: whether adaptive speculation stays on, where
the version has it). What runs per case is what ``launch_server`` runs
before it starts the scheduler: ``prepare_server_args`` (argparse + ``ServerArgs.__post_init__``),
``resolve_once`` where the version has it (the resolution pipeline of newer releases), and
``check_server_args``. One process per GPU, since SGLang caches its probes.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import stat
import sys
import tempfile

GPUS = {
    # name: (capability, device name, memory MiB, SMs)
    "H200": ((9, 0), "NVIDIA H200", 143771, 132),
    "H100": ((9, 0), "NVIDIA H100 80GB HBM3", 81559, 132),
    "B200": ((10, 0), "NVIDIA B200", 183359, 148),
    "A100": ((8, 0), "NVIDIA A100-SXM4-80GB", 81920, 108),
    "cpu": None,
}
DEVICES = 8


def _fake_nvidia_smi(gpu: str) -> str:
    """A directory with an ``nvidia-smi`` that answers the queries SGLang makes, for PATH."""
    (major, minor), name, mib, _ = GPUS[gpu]
    d = tempfile.mkdtemp(prefix="fake-nvidia-smi-")
    path = os.path.join(d, "nvidia-smi")
    rows = {
        "memory.total": str(mib),
        "memory.used": "0",
        "memory.free": str(mib),
        "name": name,
        "compute_cap": f"{major}.{minor}",
        "index": None,
        "uuid": None,
        "pci.bus_id": None,
    }
    with open(path, "w") as fh:
        fh.write(
            "#!/bin/sh\n# fake nvidia-smi (tests/real/sglang_argcheck.py)\n"
            'q=""\nfor a in "$@"; do case "$a" in --query-gpu=*) q="${a#--query-gpu=}";; esac; done\n'
            f'if [ -z "$q" ]; then echo "GPU 0: {name}"; exit 0; fi\n'
            f"i=0; while [ $i -lt {DEVICES} ]; do\n"
            '  out=""; old_ifs=$IFS; IFS=,\n'
            "  for f in $q; do\n"
            '    case "$f" in\n'
        )
        for field, value in rows.items():
            v = (
                value
                if value is not None
                else {"index": "$i", "uuid": "GPU-0000000$i", "pci.bus_id": "0000:0$i:00.0"}[field]
            )
            fh.write(f'      {field}) v="{v}";;\n')
        fh.write(
            '      *) v="[N/A]";;\n    esac\n'
            '    if [ -z "$out" ]; then out="$v"; else out="$out, $v"; fi\n'
            '  done; IFS=$old_ifs; echo "$out"; i=$((i+1)); done\n'
        )
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return d


def patch_hardware(gpu: str) -> None:
    """torch.cuda (and nvidia-smi) report DEVICES of the GPU; on ``cpu``, nothing of CUDA."""
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # torch.compile off
    os.environ.setdefault("SGLANG_IS_FLASHINFER_AVAILABLE", "true")
    import torch

    if GPUS[gpu] is None:
        torch.cuda.is_available = lambda: False
        torch.cuda.device_count = lambda: 0
        return
    (major, minor), name, mib, sms = GPUS[gpu]
    total = mib * 1024 * 1024

    class Props:
        def __init__(self, index: int = 0):
            self.name, self.major, self.minor = name, major, minor
            self.total_memory, self.multi_processor_count = total, sms
            self.gcnArchName, self.uuid, self.index = "", f"GPU-0000000{index}", index
            self.L2_cache_size, self.is_integrated = 50 * 1024 * 1024, False

    def _index(device=None) -> int:
        if isinstance(device, int):
            return device
        return getattr(device, "index", None) or 0

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: DEVICES
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_name = lambda device=None: name
    torch.cuda.get_device_properties = lambda device=None: Props(_index(device))
    torch.cuda.mem_get_info = lambda device=None: (total - 512 * 1024 * 1024, total)
    torch.cuda.is_bf16_supported = lambda *a, **k: True
    torch.cuda.set_device = lambda device: None
    torch.version.cuda = "12.9"
    os.environ["PATH"] = _fake_nvidia_smi(gpu) + os.pathsep + os.environ.get("PATH", "")


def patch_sglang_helpers(gpu: str) -> None:
    """SGLang's own probes, where its answer on CPU torch would differ from the GPU host's."""
    if GPUS[gpu] is None:
        return
    (major, minor), _, _, _ = GPUS[gpu]
    answers = {
        "is_flashinfer_available": lambda *a, **k: True,
        "is_cuda": lambda *a, **k: True,
        "is_cuda_alike": lambda *a, **k: True,
        "get_device_sm": lambda *a, **k: major * 10 + minor,
    }
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("sglang") or mod is None:
            continue
        for attr, fn in answers.items():
            if callable(getattr(mod, attr, None)):
                try:
                    setattr(mod, attr, fn)
                except (AttributeError, TypeError):
                    pass


def _values(sa) -> dict:
    get = getattr
    try:  # newer releases: the fields are the input; the resolved values live in declarations
        from sglang.srt.arg_groups.overrides import resolved_view

        view = resolved_view(sa)
        get = lambda _obj, name, default=None: getattr(view, name, default)  # noqa: E731
    except Exception:
        pass
    names = {
        "steps": "speculative_num_steps",
        "topk": "speculative_eagle_topk",
        "draft": "speculative_num_draft_tokens",
        "max_running": "max_running_requests",
        "algorithm": "speculative_algorithm",
        "attention_backend": "attention_backend",
        "page_size": "page_size",
        "draft_model_path": "speculative_draft_model_path",
        "device": "device",
        "adaptive": "speculative_adaptive",
    }
    out = {}
    for key, name in names.items():
        v = get(sa, name, None)
        out[key] = v if v is None or isinstance(v, (int, float, str, bool)) else str(v)
    return out


def run_case(argv: list[str]) -> dict:
    from sglang.srt import server_args as sargs

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            sa = sargs.prepare_server_args(list(argv))
            if hasattr(sa, "resolve_once"):
                sa.resolve_once()
            sa.check_server_args()
        return {"verdict": "ok", "exception": None, "message": None, **_values(sa)}
    except SystemExit as exc:  # argparse
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"verdict": "error", "exception": "SystemExit", "message": (lines[-1] if lines else str(exc.code))[:400]}
    except BaseException as exc:  # noqa: BLE001 - every failure is a verdict
        return {"verdict": "error", "exception": type(exc).__name__, "message": str(exc)[:400]}


# Imported before the probes are patched: their module-level `if _is_cuda: from sgl_kernel import ...`
# then takes the CPU branch (there are no CUDA kernels here; argument checking calls none of them).
# Newer releases import more of SGLang lazily, from inside the resolution pipeline: their hooks
# (sglang.srt.arg_groups.*), the model loader, the speculative registry.
PREIMPORT = (
    "sglang.srt.server_args",
    "sglang.srt.configs.model_config",
    "sglang.srt.model_loader",
    "sglang.srt.speculative.spec_info",
    "sglang.srt.speculative.spec_registry",
    "sglang.srt.layers.layernorm",
    "sglang.srt.entrypoints.engine",
)
PREIMPORT_PACKAGES = ("sglang.srt.arg_groups",)


def prepare(gpu: str) -> None:
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # torch.compile off
    logging.disable(logging.CRITICAL)
    import importlib
    import warnings

    warnings.filterwarnings("ignore")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        import pkgutil

        names = list(PREIMPORT)
        for package in PREIMPORT_PACKAGES:
            try:
                pkg = importlib.import_module(package)
            except ImportError:
                continue
            names += [f"{package}.{m.name}" for m in pkgutil.walk_packages(pkg.__path__) if not m.ispkg]
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a module this version lacks, or one that needs a GPU
                pass
    patch_hardware(gpu)
    patch_sglang_helpers(gpu)
    for mod_name, mod in list(sys.modules.items()):  # forget what the probes answered on CPU
        if mod_name.startswith("sglang") and mod is not None:
            for value in list(vars(mod).values()):
                if type(value).__name__ == "_lru_cache_wrapper":  # functools.lru_cache / cache
                    value.cache_clear()


def main() -> None:
    gpu = sys.argv[1]
    prepare(gpu)
    logging.disable(logging.CRITICAL)
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        with contextlib.redirect_stdout(io.StringIO()):
            result = run_case(case["argv"])
        logging.disable(logging.CRITICAL)
        out.write(json.dumps({"id": case["id"], **result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
