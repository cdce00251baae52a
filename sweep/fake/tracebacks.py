"""Tracebacks shaped like the ones SGLang prints, so log readers meet the same text they will in
production: the frames name SGLang's own modules, and the last line is the real exception.

Line numbers are illustrative; the exception lines are SGLang's (see shared/sglang-surface.md).
"""

from __future__ import annotations

from typing import Sequence

_SGLANG_ROOT = "/usr/local/lib/python3.12/dist-packages/sglang"

Frame = tuple[str, int, str, str]  # (file under SGLANG_ROOT or absolute, line, function, source line)

_LAUNCH: tuple[Frame, ...] = (
    ("<frozen runpy>", 198, "_run_module_as_main", ""),
    ("<frozen runpy>", 88, "_run_code", ""),
    ("launch_server.py", 11, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
    ("srt/server_args.py", 3418, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)"),
    ("srt/server_args.py", 2997, "from_cli_args", "return cls(**{attr: getattr(args, attr) for attr in attrs})"),
    ("<string>", 311, "__init__", ""),
    ("srt/server_args.py", 601, "__post_init__", "self._handle_speculative_decoding()"),
)

_SCHEDULER_INIT: tuple[Frame, ...] = (
    ("srt/managers/scheduler.py", 2890, "run_scheduler_process", "scheduler = Scheduler("),
    ("srt/managers/scheduler.py", 331, "__init__", "self.init_model_worker()"),
)

_TARGET_WORKER: tuple[Frame, ...] = (
    ("srt/managers/scheduler.py", 470, "init_model_worker", "self.tp_worker = TpModelWorker("),
    ("srt/managers/tp_worker.py", 237, "__init__", "self._model_runner = ModelRunner("),
    ("srt/model_executor/model_runner.py", 322, "__init__", "self.initialize(min_per_gpu_memory)"),
)

_DRAFT_WORKER: tuple[Frame, ...] = (
    ("srt/managers/scheduler.py", 489, "init_model_worker", "self.draft_worker = DraftWorkerClass("),
    ("srt/speculative/eagle_worker.py", 131, "__init__", "super().__init__("),
    ("srt/managers/tp_worker.py", 237, "__init__", "self._model_runner = ModelRunner("),
    ("srt/model_executor/model_runner.py", 322, "__init__", "self.initialize(min_per_gpu_memory)"),
)

_LOAD: tuple[Frame, ...] = (
    ("srt/model_executor/model_runner.py", 392, "initialize", "self.load_model()"),
    ("srt/model_executor/model_runner.py", 812, "load_model", "self.model = get_model("),
    ("srt/model_loader/__init__.py", 28, "get_model", "return loader.load_model("),
    ("srt/model_loader/loader.py", 583, "load_model", "model = _initialize_model("),
    ("srt/configs/model_config.py", 89, "__init__", "self.hf_config = get_config("),
    ("srt/utils/hf_transformers_utils.py", 204, "get_config", "config = AutoConfig.from_pretrained("),
    (
        "/usr/local/lib/python3.12/dist-packages/transformers/models/auto/configuration_auto.py",
        1197,
        "from_pretrained",
        "config_dict, unused_kwargs = PretrainedConfig.get_config_dict(pretrained_model_name_or_path, **kwargs)",
    ),
    (
        "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py",
        470,
        "cached_files",
        "raise EnvironmentError(",
    ),
)

_KV: tuple[Frame, ...] = (
    ("srt/model_executor/model_runner.py", 421, "initialize", "self.init_memory_pool("),
    ("srt/model_executor/model_runner.py", 1490, "init_memory_pool", "raise RuntimeError("),
)

_CAPTURE: tuple[Frame, ...] = (
    ("srt/model_executor/model_runner.py", 448, "initialize", "self.init_device_graphs()"),
    (
        "srt/model_executor/model_runner.py",
        1961,
        "init_device_graphs",
        "self.graph_runner = graph_runners[self.device](self)",
    ),
    ("srt/model_executor/cuda_graph_runner.py", 380, "__init__", "self.capture()"),
    ("srt/model_executor/cuda_graph_runner.py", 498, "capture", "_capture_one_stream()"),
    (
        "srt/model_executor/cuda_graph_runner.py",
        487,
        "_capture_one_stream",
        ") = self.capture_one_batch_size(bs, forward, stream_idx)",
    ),
    ("srt/model_executor/cuda_graph_runner.py", 681, "capture_one_batch_size", "run_once()"),
)

_DRAFT_INIT: tuple[Frame, ...] = (
    ("srt/managers/scheduler.py", 489, "init_model_worker", "self.draft_worker = DraftWorkerClass("),
    ("srt/speculative/eagle_worker.py", 158, "__init__", "if self.topk > 1 and self.page_size > 1:"),
)

# adaptive speculation builds a runtime state per candidate step count after the graphs (0.5.23's
# eagle_worker_v2): the target's verify graph runner for each, which no CPU attention backend implements
_ADAPTIVE_CAPTURE: tuple[Frame, ...] = (
    ("srt/speculative/eagle_worker_v2.py", 1408, "init_cuda_graphs", "self.adaptive_controller.init_states("),
    (
        "srt/speculative/adaptive_runtime_state.py",
        112,
        "init_states",
        "state = self.worker.build_adaptive_runtime_state(",
    ),
    (
        "srt/speculative/eagle_worker_v2.py",
        1820,
        "build_adaptive_runtime_state",
        "target_graph_runner = TargetGraphRunnerCls(",
    ),
    (
        "srt/model_executor/runner/decode_cuda_graph_runner.py",
        429,
        "__init__",
        "self.attn_backend.init_cuda_graph_state(self.max_bs, self.max_num_token)",
    ),
    ("srt/layers/attention/base_attn_backend.py", 258, "init_cuda_graph_state", "raise NotImplementedError()"),
)

_DRAFT_CAPTURE: tuple[Frame, ...] = (
    (
        "srt/speculative/eagle_worker.py",
        212,
        "init_cuda_graphs",
        "self.cuda_graph_runner = EAGLEDraftCudaGraphRunner(self)",
    ),
    ("srt/speculative/eagle_draft_cuda_graph_runner.py", 101, "__init__", "self.capture()"),
    ("srt/speculative/eagle_draft_cuda_graph_runner.py", 148, "capture", "CudaGraphRunner.capture(self)"),
    (
        "srt/speculative/eagle_draft_cuda_graph_runner.py",
        211,
        "run_once",
        "ret = self.eagle_worker.draft_forward(forward_batch)",
    ),
    (
        "srt/speculative/eagle_worker.py",
        655,
        "draft_forward",
        "parent_list, top_scores_index, draft_tokens = organize_draft_results(",
    ),
    (
        "srt/speculative/eagle_utils.py",
        1104,
        "organize_draft_results",
        "top_scores = torch.topk(score_list, num_draft_token - 1, dim=-1)",
    ),
)

_SERVE: tuple[Frame, ...] = (
    ("srt/managers/scheduler.py", 2915, "run_scheduler_process", "scheduler.event_loop_normal()"),
    (
        "/usr/local/lib/python3.12/dist-packages/torch/utils/_contextlib.py",
        116,
        "decorate_context",
        "return func(*args, **kwargs)",
    ),
    ("srt/managers/scheduler.py", 1012, "event_loop_normal", "result = self.run_batch(batch)"),
    ("srt/managers/scheduler.py", 2016, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
    (
        "srt/managers/tp_worker.py",
        392,
        "forward_batch_generation",
        "next_token_ids = self.model_runner.sample(logits_output, forward_batch)",
    ),
    ("srt/model_executor/model_runner.py", 2104, "sample", "next_token_ids = self.sampler("),
)


def _render(frames: Sequence[Frame]) -> str:
    out = []
    for path, line, func, code in frames:
        full = path if path.startswith(("/", "<")) else f"{_SGLANG_ROOT}/{path}"
        out.append(f'  File "{full}", line {line}, in {func}\n')
        if code:
            out.append(f"    {code}\n")
    return "".join(out)


def _traceback_text(frames: Sequence[Frame], exception: str) -> str:
    return "Traceback (most recent call last):\n" + _render(frames) + exception.rstrip("\n") + "\n"


def server_args_error(exception: str, source_line: str) -> str:
    """What ``python -m sglang.launch_server`` prints when ServerArgs rejects its arguments."""
    frames = (*_LAUNCH, ("srt/server_args.py", 1187, "_handle_speculative_decoding", source_line))
    return _traceback_text(frames, exception)


# Where a scheduler (TP rank) fails during initialization -> its frames.
INIT_STACKS: dict[str, tuple[Frame, ...]] = {
    "load": (*_SCHEDULER_INIT, *_TARGET_WORKER, *_LOAD),
    "kv": (*_SCHEDULER_INIT, *_TARGET_WORKER, *_KV),
    "capture": (*_SCHEDULER_INIT, *_TARGET_WORKER, *_CAPTURE),
    "draft_init": (*_SCHEDULER_INIT, *_DRAFT_INIT),
    "draft_load": (*_SCHEDULER_INIT, *_DRAFT_WORKER, *_LOAD),
    "draft_capture": (*_SCHEDULER_INIT, *_DRAFT_CAPTURE),
    "adaptive_capture": (*_SCHEDULER_INIT, *_ADAPTIVE_CAPTURE),
    "serve": _SERVE,
}


def scheduler_exception(where: str, exception: str, cause: str | None = None) -> str:
    """The message after ``Scheduler hit an exception: `` (a traceback, optionally chained)."""
    frames = INIT_STACKS[where]
    if cause is None:
        return _traceback_text(frames, exception)
    first = _traceback_text(frames, cause)
    # the capture's own frame catches it and raises again (cuda_graph_runner.__init__)
    rethrow = (("srt/model_executor/cuda_graph_runner.py", 383, "__init__", "raise Exception("),)
    return (
        first
        + "\nDuring handling of the above exception, another exception occurred:\n\n"
        + _traceback_text((*frames[:-4], *rethrow), exception)
    )


def missing_model_error(path: str) -> str:
    """transformers' error for a model path that is neither a folder nor a Hub repo."""
    return (
        f"OSError: {path} is not a local folder and is not a valid model identifier listed on "
        "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a token "
        "having permission to this repo either by logging in with `hf auth login` or by passing "
        "`token=<your_token>`"
    )


CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {gpu} has a total "
    "capacity of {total:.2f} GiB of which {free:.2f} GiB is free. Including non-PyTorch memory, this "
    "process has {used:.2f} GiB memory in use. Of the allocated memory {alloc:.2f} GiB is allocated by "
    "PyTorch, and 1.05 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory "
    "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
    "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#"
    "environment-variables)"
)

CAPTURE_FAILED_HINT = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)

ILLEGAL_ACCESS = (
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
