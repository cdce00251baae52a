"""The type argparse gives each ``launch_server`` flag's value, per SGLang version: ``int``, ``float``,
``switch`` (no value: store_true, ``--flag``/``--no-flag``), a list of several values (``int-list``,
``float-list``, ``str-list``: ``nargs='+'`` or ``'*'``), ``optional`` (a value or none), and the
choices of the flags that have them. Read from each release's own parser (``ServerArgs.add_cli_args``;
0.5.10 and 0.5.23 from the registry, 7f8f030 from the CPU build), like ``sweep.sglang.flagnames``;
flags of any other type (a plain string, JSON, ``human_readable_int``) take any one value. Data only.
Regenerate with tests/real/test_rules_differential.py's ``dump_flag_types``.
"""

from __future__ import annotations

from typing import Any, Optional

from sweep.sglang.args import arg_values
from sweep.sglang.serverargs import KNOWN_BUILDS, rules_version

KINDS = ("int", "float", "switch", "int-list", "float-list", "str-list", "optional")

_COMMON: dict[str, str] = {
    "int": """
        attention-context-parallel-size attn-cp-size base-gpu-id chunked-prefill-size cpu-offload-gb
        data-parallel-size decode-log-interval default-priority-value disaggregation-bootstrap-port
        disaggregation-decode-polling-interval dist-timeout dp-size dynamic-batch-tokenizer-batch-size
        engine-info-bootstrap-port ep ep-num-redundant-experts ep-size eplb-rebalance-layers-per-chunk
        eplb-rebalance-num-iterations expert-distribution-recorder-buffer-size expert-parallel-size
        gpu-id-step hicache-size kt-cpuinfer kt-max-deferred-experts-per-token kt-num-gpu-experts
        kt-threadpool-count log-requests-level mamba-track-interval max-loaded-loras max-lora-chunk-size
        max-lora-rank max-loras-per-batch max-mamba-cache-size max-queued-requests max-running-requests
        moe-data-parallel-size moe-dense-tp-size moe-dp-size nccl-port nnodes node-rank
        num-continuous-decode-steps num-reserved-decode-tokens offload-group-size offload-num-in-group
        offload-prefetch-step page-size pipeline-parallel-size port pp-async-batch-depth
        pp-max-micro-batch-size pp-size prefill-delayer-max-delay-passes prefill-max-requests
        priority-scheduling-preemption-threshold random-seed
        remote-instance-weight-loader-seed-instance-service-port scheduler-recv-interval sm-group-num
        speculative-eagle-topk speculative-ngram-capacity speculative-ngram-max-bfs-breadth
        speculative-ngram-max-trie-depth speculative-ngram-min-bfs-breadth speculative-num-draft-tokens
        speculative-num-steps stream-interval tensor-parallel-size tokenizer-worker-num torch-compile-max-bs
        tp-size triton-attention-num-kv-splits triton-attention-split-tile-size
    """,
    "float": """
        dynamic-batch-tokenizer-batch-timeout eplb-min-rebalancing-utilization-threshold
        gc-warning-threshold-secs hicache-ratio mamba-full-memory-ratio mem-fraction-static
        prefill-delayer-token-usage-low-watermark schedule-conservativeness soft-watchdog-timeout
        speculative-accept-threshold-acc speculative-accept-threshold-single swa-full-tokens-ratio
        tbo-token-distribution-threshold watchdog-timeout
    """,
    "switch": """
        abort-on-priority-when-disabled allow-auto-truncate checkpoint-engine-wait-weights-before-ready
        constrained-json-disable-any-whitespace delete-ckpt-after-loading disable-chunked-prefix-cache
        disable-cuda-graph disable-cuda-graph-padding disable-custom-all-reduce disable-fast-image-processor
        disable-flashinfer-autotune disable-flashinfer-cutlass-moe-fp4-allgather disable-hybrid-swa-memory
        disable-outlines-disk-cache disable-overlap-schedule disable-priority-preemption disable-radix-cache
        disable-shared-experts-fusion disable-tokenizer-batch-decode
        disaggregation-decode-enable-offload-kvcache enable-adaptive-dispatch-to-encoder
        enable-aiter-allreduce-fusion enable-attn-tp-input-scattered enable-broadcast-mm-inputs-process
        enable-cache-report enable-cudagraph-gc enable-custom-logit-processor enable-deterministic-inference
        enable-dp-attention enable-dp-lm-head enable-draft-weights-cpu-backup enable-dynamic-batch-tokenizer
        enable-dynamic-chunking enable-elastic-expert-backup enable-eplb enable-flashinfer-allreduce-fusion
        enable-fp32-lm-head enable-fused-moe-sum-all-reduce enable-fused-qk-norm-rope
        enable-hierarchical-cache enable-hisparse enable-layerwise-nvtx-marker enable-lmcache enable-lora
        enable-lora-overlap-loading enable-memory-saver enable-metrics enable-metrics-for-all-schedulers
        enable-mfu-metrics enable-mixed-chunk enable-mm-global-cache enable-mscclpp enable-multi-layer-eagle
        enable-multimodal enable-nccl-nvls enable-p2p-check enable-pdmux
        enable-precise-embedding-interpolation enable-prefill-delayer enable-prefix-mm-cache
        enable-priority-scheduling enable-profile-cuda-graph enable-request-time-stats-logging
        enable-return-hidden-states enable-return-routed-experts enable-single-batch-overlap
        enable-ssl-refresh enable-streaming-session enable-symm-mem enable-tokenizer-batch-encode
        enable-torch-compile enable-torch-compile-debug-mode enable-torch-symm-mem enable-trace
        enable-two-batch-overlap enable-weights-cpu-backup encoder-only
        enforce-disable-flashinfer-allreduce-fusion experts-shared-outer-loras export-metrics-to-file
        flashinfer-mla-disable-ragged grpc-mode incremental-streaming-output is-embedding language-only
        log-requests mm-enable-dp-encoder no-experts-shared-outer-loras pre-warm-nccl quantize-and-serve
        remote-instance-weight-loader-start-seed-via-transfer-engine schedule-low-priority-values-first
        show-time-cost skip-server-warmup skip-tokenizer-init sleep-on-idle
        stream-response-default-include-usage triton-attention-reduce-in-fp32 trust-remote-code use-ray
        weight-loader-disable-mmap
    """,
    "int-list": """
        debug-tensor-dump-layers gc-threshold numa-node
    """,
    "float-list": """
        bucket-e2e-request-latency bucket-inter-token-latency bucket-time-to-first-token
        prefill-delayer-forward-passes-buckets prefill-delayer-wait-seconds-buckets
    """,
    "str-list": """
        custom-weight-loader encoder-urls generation-tokens-buckets log-requests-target lora-paths
        prompt-tokens-buckets tokenizer-metrics-allowed-custom-labels uvicorn-access-log-exclude-prefixes
    """,
    "optional": """
        model-checksum
    """,
}
_COMMON_CHOICES: dict[str, tuple[str, ...]] = {
    "deepep-mode": ("auto", "low_latency", "normal"),
    "disaggregation-mode": ("decode", "null", "prefill"),
    "dtype": ("auto", "bfloat16", "float", "float16", "float32", "half"),
    "elastic-ep-backend": ("mooncake", "nixl", "none"),
    "grammar-backend": ("llguidance", "none", "outlines", "xgrammar"),
    "hicache-io-backend": ("direct", "kernel", "kernel_ascend"),
    "hicache-mem-layout": ("layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head"),
    "hicache-storage-prefetch-policy": ("best_effort", "timeout", "wait_complete"),
    "hicache-write-policy": ("write_back", "write_through", "write_through_selective"),
    "load-balance-method": ("auto", "follow_bootstrap_room", "round_robin", "total_requests", "total_tokens"),
    "log-requests-format": ("json", "text"),
    "log-requests-level": ("0", "1", "2", "3"),
    "lora-eviction-policy": ("fifo", "lru"),
    "mamba-backend": ("flashinfer", "triton"),
    "mamba-ssm-dtype": ("bfloat16", "float16", "float32"),
    "max-lora-chunk-size": ("128", "16", "32", "64"),
    "remote-instance-weight-loader-backend": ("modelexpress", "nccl", "transfer_engine"),
    "rl-on-policy-target": ("fsdp",),
    "sampling-defaults": ("model", "openai"),
    "speculative-attention-mode": ("decode", "prefill"),
    "speculative-ngram-match-type": ("BFS", "PROB"),
    "tokenizer-mode": ("auto", "slow"),
}

_ONLY_0_5_10: dict[str, str] = {
    "int": """
        cuda-graph-max-bs ds-heavy-channel-num ds-heavy-token-num ds-sparse-decode-threshold
        multi-item-scoring-delimiter piecewise-cuda-graph-max-tokens
    """,
    "switch": """
        collect-tokens-histogram disable-piecewise-cuda-graph enable-double-sparsity
        enable-expert-distribution-metrics enable-nan-detection enable-nsa-prefill-context-parallel
        enable-piecewise-cuda-graph enable-prefill-context-parallel enforce-piecewise-cuda-graph
        hybrid-kvcache-ratio keep-mm-feature-on-device prefill-round-robin-balance stream-output
    """,
    "int-list": """
        cuda-graph-bs piecewise-cuda-graph-tokens
    """,
    "str-list": """
        lora-target-modules
    """,
}
_ONLY_0_5_10_CHOICES: dict[str, tuple[str, ...]] = {
    "attention-backend": (
        "aiter",
        "ascend",
        "cutlass_mla",
        "dual_chunk_flash_attn",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "intel_amx",
        "intel_xpu",
        "nsa",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "decode-attention-backend": (
        "aiter",
        "ascend",
        "cutlass_mla",
        "dual_chunk_flash_attn",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "intel_amx",
        "intel_xpu",
        "nsa",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "disaggregation-transfer-backend": ("ascend", "fake", "mooncake", "mori", "nixl"),
    "encoder-transfer-backend": ("mooncake", "zmq_to_scheduler", "zmq_to_tokenizer"),
    "flashinfer-mxfp4-moe-precision": ("bf16", "default"),
    "fp4-gemm-backend": ("auto", "cutlass", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm"),
    "fp8-gemm-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "flashinfer_cutlass",
        "flashinfer_deepgemm",
        "flashinfer_trtllm",
        "triton",
    ),
    "hicache-storage-backend": ("aibrix", "dynamic", "eic", "file", "hf3fs", "mooncake", "nixl"),
    "kv-cache-dtype": ("auto", "bf16", "bfloat16", "fp4_e2m1", "fp8_e4m3", "fp8_e5m2"),
    "linear-attn-backend": ("cutedsl", "flashinfer", "triton"),
    "linear-attn-decode-backend": ("cutedsl", "flashinfer", "triton"),
    "linear-attn-prefill-backend": ("cutedsl", "flashinfer", "triton"),
    "load-format": (
        "auto",
        "bitsandbytes",
        "dummy",
        "fastsafetensors",
        "flash_rl",
        "gguf",
        "layered",
        "mistral",
        "npcache",
        "private",
        "pt",
        "remote",
        "remote_instance",
        "runai_streamer",
        "safetensors",
        "sharded_state",
    ),
    "lora-backend": ("ascend", "csgmv", "torch_native", "triton"),
    "lora-target-modules": (
        "all",
        "down_proj",
        "embed_tokens",
        "gate_proj",
        "gate_up_proj",
        "k_proj",
        "lm_head",
        "o_proj",
        "q_proj",
        "qkv_proj",
        "up_proj",
        "v_proj",
    ),
    "mamba-scheduler-strategy": ("auto", "extra_buffer", "no_buffer"),
    "mm-attention-backend": ("aiter_attn", "ascend_attn", "fa3", "fa4", "flashinfer_cudnn", "sdpa", "triton_attn"),
    "moe-a2a-backend": ("ascend_fuseep", "deepep", "flashinfer", "mooncake", "mori", "nixl", "none"),
    "moe-runner-backend": (
        "auto",
        "cutlass",
        "deep_gemm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_mxfp4",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "triton",
        "triton_kernel",
    ),
    "nsa-decode-backend": ("aiter", "fa3", "flashmla_auto", "flashmla_kv", "flashmla_sparse", "tilelang", "trtllm"),
    "nsa-prefill-backend": ("aiter", "fa3", "flashmla_auto", "flashmla_kv", "flashmla_sparse", "tilelang", "trtllm"),
    "nsa-prefill-cp-mode": ("in-seq-split", "round-robin-split"),
    "piecewise-cuda-graph-compiler": ("eager", "inductor"),
    "prefill-attention-backend": (
        "aiter",
        "ascend",
        "cutlass_mla",
        "dual_chunk_flash_attn",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "intel_amx",
        "intel_xpu",
        "nsa",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "prefill-cp-mode": ("in-seq-split",),
    "quantization": (
        "auto-round",
        "awq",
        "awq_marlin",
        "bitsandbytes",
        "compressed-tensors",
        "fp8",
        "gguf",
        "gptq",
        "gptq_marlin",
        "marlin",
        "modelopt",
        "modelopt_fp4",
        "modelopt_fp8",
        "modelopt_mixed",
        "modelslim",
        "moe_wna16",
        "mxfp4",
        "mxfp8",
        "petit_nvfp4",
        "qoq",
        "quark_int4fp8_moe",
        "w4afp8",
        "w8a8_fp8",
        "w8a8_int8",
    ),
    "radix-eviction-policy": ("lfu", "lru", "slru"),
    "reasoning-parser": (
        "deepseek-r1",
        "deepseek-v3",
        "glm45",
        "gpt-oss",
        "interns1",
        "kimi",
        "kimi_k2",
        "mimo",
        "minimax",
        "minimax-append-think",
        "mistral",
        "nemotron_3",
        "qwen3",
        "qwen3-thinking",
        "step3",
        "step3p5",
    ),
    "sampling-backend": ("ascend", "flashinfer", "pytorch"),
    "schedule-policy": ("dfs-weight", "fcfs", "lof", "lpm", "priority", "random", "routing-key"),
    "speculative-algorithm": ("EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE"),
    "speculative-draft-load-format": (
        "auto",
        "bitsandbytes",
        "dummy",
        "fastsafetensors",
        "flash_rl",
        "gguf",
        "layered",
        "mistral",
        "npcache",
        "private",
        "pt",
        "remote",
        "remote_instance",
        "runai_streamer",
        "safetensors",
        "sharded_state",
    ),
    "speculative-draft-model-quantization": (
        "auto-round",
        "awq",
        "awq_marlin",
        "bitsandbytes",
        "compressed-tensors",
        "fp8",
        "gguf",
        "gptq",
        "gptq_marlin",
        "marlin",
        "modelopt",
        "modelopt_fp4",
        "modelopt_fp8",
        "modelopt_mixed",
        "modelslim",
        "moe_wna16",
        "mxfp4",
        "mxfp8",
        "petit_nvfp4",
        "qoq",
        "quark_int4fp8_moe",
        "unquant",
        "w4afp8",
        "w8a8_fp8",
        "w8a8_int8",
    ),
    "speculative-moe-a2a-backend": ("ascend_fuseep", "deepep", "flashinfer", "mooncake", "mori", "nixl", "none"),
    "speculative-moe-runner-backend": (
        "auto",
        "cutlass",
        "deep_gemm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_mxfp4",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "triton",
        "triton_kernel",
    ),
    "tool-call-parser": (
        "deepseekv3",
        "deepseekv31",
        "deepseekv32",
        "gigachat3",
        "glm",
        "glm45",
        "glm47",
        "gpt-oss",
        "hermes",
        "interns1",
        "kimi_k2",
        "lfm2",
        "llama3",
        "mimo",
        "minimax-m2",
        "mistral",
        "pythonic",
        "qwen",
        "qwen25",
        "qwen3_coder",
        "step3",
        "step3p5",
        "trinity",
    ),
}

_ONLY_0_5_23: dict[str, str] = {
    "int": """
        asr-max-buffer-seconds asr-max-concurrent-sessions attention-data-parallel-size attn-dp-size
        batch-notify-size c128-page-size constrained-json-max-whitespace-cnt cuda-graph-max-bs-decode
        cuda-graph-max-bs-prefill cuda-graph-max-seq-len-prefill dcp-size decode-context-parallel-size
        decoupled-spec-rank detokenizer-worker-num disaggregation-decode-extra-slots dsa-triton-union
        dwdp-size elastic-ep-initial-size elastic-ep-join-rank-offset encoder-bootstrap-port fuseep-mode
        gated-launch-port grpc-http-sidecar-port grpc-port grpc-response-timeout-secs
        hicache-storage-prefetch-retry-max-attempts hicache-storage-prefetch-retry-poll-interval
        http2-initial-connection-window-size http2-max-concurrent-streams int8-mamba-ckpt-size
        kv-canary-sweep-interval linear-replayssm-cache-len load-snapshot-publish-interval
        mamba-cache-philox-rounds mamba-max-states-per-path max-ep-size media-url-max-file-size-mb
        min-free-slots-delay mm-io-worker-num mm-preprocess-cache-size-mb mm-processor-worker-num
        optimistic-prefill-attempts paged-experts-num-resident prefill-decode-interval
        prefill-decode-interval-min-bs sampling-mask-max-tokens shared-experts-tp-size smg-http-sidecar-port
        speculative-dflash-block-size speculative-domino-candidate-pool-size speculative-draft-sink-size
        speculative-draft-window-size speculative-dspark-block-size
        speculative-ngram-external-corpus-max-tokens speculative-ngram-external-sam-budget swa-prefix-tails
        weight-cache-timeout weight-loader-prefetch-num-threads
    """,
    "float": """
        disaggregation-decode-host-receive-threshold elastic-ep-scale-timeout hicache-host-memory-fraction
        lora-drain-wait-threshold prefill-delayer-max-delay-ms prefill-delayer-queue-min-ratio
    """,
    "switch": """
        dcp-replicate-q-proj debug-cuda-graph disable-aiter-allreduce-fusion-in-decode
        disable-aiter-allreduce-fusion-in-prefill disable-attn-tp-gather disable-decode-cuda-graph
        disable-prefill-cuda-graph disaggregation-decode-enable-radix-cache
        disaggregation-enable-kv-checksum dllm-fdfo enable-amd-monokernel enable-cp-decode-attn-tp
        enable-decoder-swa-bounded-replay enable-deepseek-v4-fp4-indexer enable-dense-mlp-attn-tp
        enable-dp-attention-local-control-broadcast enable-dsa-cache-layer-split enable-dsa-fused-indexer
        enable-encoder-swa-bounded-replay enable-flexkv enable-forward-pass-metrics enable-hicache
        enable-http-worker-reuseport enable-http2 enable-int8-mamba-checkpoint enable-kv-cache-sharding
        enable-layernorm-sp enable-lean-attention enable-linear-replayssm enable-linear-replayssm-spec
        enable-linker-mla-dedup enable-mamba-cache-stochastic-rounding enable-megamoe-for-layernorm-sp
        enable-mis enable-nvidia-megakernel enable-page-major-kv-layout enable-paged-experts
        enable-pd-role-switch enable-prefill-cp enable-quant-communications enable-response-store
        enable-return-aux-hidden-states enable-return-indexer-topk enable-scattered-sconv
        enable-session-radix-cache enable-shared-experts-attn-tp enable-strict-thinking enable-tf32-matmul
        enable-tp-lm-head-all-to-all enable-unified-cache-external-linker enable-unified-memory
        enable-w4a4-mxfp4-megamoe enable-waterfill enable-watermark enforce-shared-experts-fusion
        language-model-only lora-strict-loading lora-use-virtual-experts mlx-enable-sampling
        no-dcp-replicate-q-proj no-dllm-fdfo no-enable-decoder-swa-bounded-replay
        no-enable-dsa-fused-indexer no-enable-fused-qk-norm-rope no-enable-tf32-matmul
        no-enable-tp-lm-head-all-to-all no-lora-strict-loading no-mm-enable-dp-encoder
        no-ple-offload-embedding no-speculative-enable-w4a4-mxfp4-megamoe ple-offload-embedding
        prefill-only-disable-kv-cache return-input-ids return-output-ids smg-grpc-mode speculative-adaptive
        speculative-dspark-align-verify-tokens-to-graph-tier speculative-enable-w4a4-mxfp4-megamoe
        speculative-use-block-verification speculative-use-rejection-sampling strip-thinking-cache
        trust-mm-content-hashes trust-request-chat-template weight-loader-drop-cache-after-load
        weight-loader-prefetch-checkpoints
    """,
    "int-list": """
        cuda-graph-bs-decode cuda-graph-bs-prefill return-aux-hidden-state-layer-ids
    """,
    "str-list": """
        allowed-media-domains encoder-register-urls flashinfer-autotune-skip-ops lora-target-modules
    """,
}
_ONLY_0_5_23_CHOICES: dict[str, tuple[str, ...]] = {
    "attention-backend": (
        "aiter",
        "ascend",
        "compressed",
        "cutedsl_mla",
        "dsa",
        "dsv4",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "hpc_ops",
        "intel_amx",
        "intel_xpu",
        "llada2_cfg_flashinfer",
        "minicpm_flashattn",
        "minicpm_flashinfer",
        "nsa",
        "qsa",
        "tokenspeed_mla",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "bf16-gemm-backend": ("auto", "cutedsl", "gemv", "torch"),
    "boundary-reduction": ("ar", "auto", "rs", "rs+rsv", "rsv"),
    "cp-strategy": ("interleave", "zigzag"),
    "cuda-graph-backend-decode": ("breakable", "disabled", "full"),
    "cuda-graph-backend-prefill": ("breakable", "disabled", "full"),
    "dcp-comm-backend": ("a2a", "ag_rs", "fi_a2a"),
    "decode-attention-backend": (
        "aiter",
        "ascend",
        "compressed",
        "cutedsl_mla",
        "dsa",
        "dsv4",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "hpc_ops",
        "intel_amx",
        "intel_xpu",
        "llada2_cfg_flashinfer",
        "minicpm_flashattn",
        "minicpm_flashinfer",
        "nsa",
        "qsa",
        "tokenspeed_mla",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "decoupled-spec-role": ("drafter", "null", "verifier"),
    "deepep-dispatcher-output-dtype": ("auto", "bf16", "fp8", "int8", "nvfp4"),
    "deepep-v2-mode": ("direct", "hybrid"),
    "disaggregation-decode-allocation-policy": ("early", "prefill_complete"),
    "disaggregation-decode-retraction-backup": ("cpu_tensor", "host_pool", "none"),
    "disaggregation-transfer-backend": ("ascend", "fake", "mooncake", "mooncake_tcp", "mori", "nixl"),
    "dsa-decode-backend": (
        "aiter",
        "fa3",
        "flashinfer_sparse_mla",
        "flashmla_auto",
        "flashmla_kv",
        "flashmla_sparse",
        "flashmla_sparse_q8",
        "intel_xpu",
        "tilelang",
        "triton",
        "trtllm",
    ),
    "dsa-paged-mqa-logits-backend": ("aiter", "auto", "cutedsl", "deepgemm"),
    "dsa-prefill-backend": (
        "aiter",
        "fa3",
        "flashinfer_sparse_mla",
        "flashmla_auto",
        "flashmla_kv",
        "flashmla_sparse",
        "flashmla_sparse_q8",
        "intel_xpu",
        "tilelang",
        "triton",
        "triton_sparse_mla",
        "trtllm",
    ),
    "dsa-topk-backend": ("flashinfer", "sgl-kernel", "torch"),
    "dsa-triton-union": ("0", "2", "4"),
    "dsv4-attn-backend": ("auto", "flashmla", "flashmla_mega", "trtllm"),
    "dsv4-prefill-backend": ("auto", "flashmla_sparse", "flashmla_sparse_q8"),
    "elastic-ep-join-mode": ("recover", "scale"),
    "encoder-transfer-backend": ("auto", "mooncake", "zmq_to_scheduler", "zmq_to_tokenizer"),
    "ep-dispatch-algorithm": ("dynamic", "fake", "lp", "static"),
    "expert-balancedness-report-mode": ("both", "off", "prometheus", "server_log"),
    "expert-distribution-recorder-mode": ("per_pass", "per_token", "stat", "stat_approx"),
    "flashinfer-a2a-dispatch-type": ("auto", "bf16", "mxfp8", "nvfp4"),
    "flashinfer-allreduce-fusion-backend": ("auto", "cutedsl", "mnnvl", "trtllm"),
    "flashinfer-mxfp4-moe-precision": ("bf16", "default", "fp8"),
    "fp4-gemm-backend": (
        "auto",
        "flashinfer_cudnn",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_trtllm",
        "marlin",
    ),
    "fp8-gemm-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_deepgemm",
        "flashinfer_trtllm",
        "triton",
    ),
    "fuseep-mode": ("1", "2"),
    "hicache-host-memory-mode": ("buffer_only", "cache"),
    "hicache-storage-backend": (
        "aibrix",
        "dynamic",
        "eic",
        "file",
        "hf3fs",
        "mooncake",
        "mori",
        "nixl",
        "npu_memcache",
        "seaweedfs",
        "shm",
        "sim",
        "simm",
        "tensorcast",
    ),
    "image-processor-backend": ("auto", "pil", "torchvision"),
    "kv-cache-dtype": ("auto", "bf16", "bfloat16", "fp4_mx_block16", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4"),
    "kv-canary": ("log", "none", "raise"),
    "kv-canary-real-data": ("all", "none", "partial"),
    "linear-attn-backend": (
        "cutedsl",
        "flashinfer",
        "flashkda",
        "helion",
        "intel_xpu",
        "nvidia_kda",
        "ptx_kda",
        "triton",
    ),
    "linear-attn-decode-backend": (
        "cutedsl",
        "flashinfer",
        "flashkda",
        "helion",
        "intel_xpu",
        "nvidia_kda",
        "ptx_kda",
        "triton",
    ),
    "linear-attn-prefill-backend": (
        "cutedsl",
        "flashinfer",
        "flashkda",
        "helion",
        "intel_xpu",
        "nvidia_kda",
        "ptx_kda",
        "triton",
    ),
    "linear-attn-verify-backend": (
        "cutedsl",
        "flashinfer",
        "flashkda",
        "helion",
        "intel_xpu",
        "nv_cutedsl",
        "nvidia_kda",
        "ptx_kda",
        "triton",
    ),
    "load-format": (
        "auto",
        "bitsandbytes",
        "dummy",
        "expert_pack",
        "fastsafetensors",
        "flash_rl",
        "gguf",
        "instanttensor",
        "layered",
        "mistral",
        "npcache",
        "presharded",
        "private",
        "pt",
        "remote",
        "remote_instance",
        "runai_streamer",
        "safetensors",
        "sharded_state",
    ),
    "lora-backend": ("ascend", "csgmv", "torch_native", "triton", "triton_v2"),
    "lora-target-modules": (
        "all",
        "down_proj",
        "embed_tokens",
        "gate_proj",
        "gate_up_proj",
        "k_proj",
        "kv_a_proj_with_mqa",
        "kv_b_proj",
        "lm_head",
        "o_proj",
        "q_a_proj",
        "q_b_proj",
        "q_proj",
        "qkv_proj",
        "qkvr",
        "up_proj",
        "v_proj",
        "weights_proj",
        "wk",
        "wo_ud",
        "wq_b",
    ),
    "mamba-radix-cache-strategy": ("auto", "extra_buffer", "extra_buffer_lazy", "no_buffer"),
    "mm-attention-backend": (
        "aiter_attn",
        "amx_attn",
        "ascend_attn",
        "fa3",
        "fa4",
        "flashinfer_cudnn",
        "sdpa",
        "triton_attn",
        "xpu_attn",
    ),
    "mm-feature-transport": ("cpu", "cuda_ipc", "cuda_vmm"),
    "mm-global-cache-backend": ("mooncake",),
    "moe-a2a-backend": (
        "ascend_fuseep",
        "ascend_tp",
        "deepep",
        "deepep_v2",
        "flashinfer",
        "flashinfer_megamoe",
        "megamoe",
        "mooncake",
        "mori",
        "nixl",
        "none",
        "pplx",
    ),
    "moe-runner-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "experimental_sgl_marlin",
        "experimental_sgl_trtllm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_megamoe",
        "flashinfer_mxfp4",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "hpc_ops",
        "humming",
        "intel_xpu",
        "lora_cutedsl",
        "lora_marlin",
        "lora_triton",
        "marlin",
        "megamoe",
        "triton",
        "triton_kernel",
    ),
    "monokernel-backend": ("amd",),
    "ple-offload-backend": ("file", "pinned"),
    "prefill-attention-backend": (
        "aiter",
        "ascend",
        "compressed",
        "cutedsl_mla",
        "dsa",
        "dsv4",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "hpc_ops",
        "intel_amx",
        "intel_xpu",
        "llada2_cfg_flashinfer",
        "minicpm_flashattn",
        "minicpm_flashinfer",
        "nsa",
        "qsa",
        "tokenspeed_mla",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "prefill-kv-cache-dequant-dtype": ("auto", "fp8_e4m3", "nvfp4"),
    "qsa-indexer-dtype": ("auto", "bfloat16", "fp8_e4m3"),
    "quantization": (
        "auto-round",
        "auto-round-int8",
        "awq",
        "awq_marlin",
        "bitsandbytes",
        "compressed-tensors",
        "fp8",
        "gguf",
        "gptq",
        "gptq_marlin",
        "humming",
        "mlx_q4",
        "mlx_q8",
        "modelopt",
        "modelopt_fp4",
        "modelopt_fp8",
        "modelopt_mixed",
        "modelslim",
        "moe_wna16",
        "mxfp4",
        "mxfp8",
        "mxfp_w4a8",
        "nvfp4_online",
        "petit_nvfp4",
        "quark",
        "quark_int4fp8_moe",
        "quark_mxfp4",
        "unquant",
        "w4afp8",
        "w8a8_fp8",
        "w8a8_int8",
    ),
    "radix-eviction-policy": ("lfu", "lru", "priority", "slru", "tlru"),
    "reasoning-parser": (
        "apertus2509",
        "auto",
        "beam",
        "cohere_command4",
        "deepseek-r1",
        "deepseek-v3",
        "deepseek-v4",
        "deepseek-v41",
        "dots",
        "gemma4",
        "gigachat35",
        "glm45",
        "gpt-oss",
        "granite_thinking_parser",
        "hunyuan",
        "inkling",
        "interns1",
        "iquest_q1",
        "k2_horizon",
        "kimi",
        "kimi_k2",
        "kimi_k3",
        "ling3",
        "mimo",
        "minimax",
        "minimax-append-think",
        "minimax-m3",
        "mistral",
        "muse",
        "nanbeige",
        "nemotron_3",
        "poolside_v1",
        "qwen3",
        "qwen3-thinking",
        "response_template",
        "step3",
        "step3p5",
    ),
    "retraction-policy": ("length", "priority"),
    "return-hidden-states-mode": ("full", "last"),
    "sampling-backend": ("ascend", "flashinfer", "intel_xpu", "pytorch"),
    "schedule-policy": (
        "dfs-weight",
        "fcfs",
        "hrrn",
        "lof",
        "lpm",
        "priority",
        "random",
        "routing-key",
        "shortest-prefill-first",
    ),
    "speculative-draft-kv-cache-dtype": ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"),
    "speculative-draft-load-format": (
        "auto",
        "bitsandbytes",
        "dummy",
        "expert_pack",
        "fastsafetensors",
        "flash_rl",
        "gguf",
        "instanttensor",
        "layered",
        "mistral",
        "npcache",
        "presharded",
        "private",
        "pt",
        "remote",
        "remote_instance",
        "runai_streamer",
        "safetensors",
        "sharded_state",
    ),
    "speculative-draft-model-quantization": (
        "auto-round",
        "auto-round-int8",
        "awq",
        "awq_marlin",
        "bitsandbytes",
        "compressed-tensors",
        "fp8",
        "gguf",
        "gptq",
        "gptq_marlin",
        "humming",
        "mlx_q4",
        "mlx_q8",
        "modelopt",
        "modelopt_fp4",
        "modelopt_fp8",
        "modelopt_mixed",
        "modelslim",
        "moe_wna16",
        "mxfp4",
        "mxfp8",
        "mxfp_w4a8",
        "nvfp4_online",
        "petit_nvfp4",
        "quark",
        "quark_int4fp8_moe",
        "quark_mxfp4",
        "unquant",
        "w4afp8",
        "w8a8_fp8",
        "w8a8_int8",
    ),
    "speculative-dsa-topk-backend": ("flashinfer", "sgl-kernel", "torch"),
    "speculative-moe-a2a-backend": (
        "ascend_fuseep",
        "ascend_tp",
        "deepep",
        "deepep_v2",
        "flashinfer",
        "megamoe",
        "mooncake",
        "mori",
        "nixl",
        "none",
        "pplx",
    ),
    "speculative-moe-runner-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "experimental_sgl_marlin",
        "experimental_sgl_trtllm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_megamoe",
        "flashinfer_mxfp4",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "hpc_ops",
        "humming",
        "intel_xpu",
        "lora_cutedsl",
        "lora_marlin",
        "lora_triton",
        "marlin",
        "megamoe",
        "triton",
        "triton_kernel",
    ),
    "startup-weight-load-mode": ("overlap", "serial"),
    "tokenizer-backend": ("fastokens", "huggingface"),
    "tool-call-parser": (
        "apertus2509",
        "auto",
        "beam",
        "cohere_command4",
        "deepseekv3",
        "deepseekv31",
        "deepseekv32",
        "deepseekv4",
        "deepseekv41",
        "dots",
        "gemma4",
        "gigachat3",
        "gigachat35",
        "glm",
        "glm45",
        "glm47",
        "gpt-oss",
        "hermes",
        "hunyuan",
        "inkling",
        "interns1",
        "iquest_q1",
        "k2_horizon",
        "kimi_k2",
        "kimi_k3",
        "lfm2",
        "ling3",
        "llama3",
        "mimo",
        "minicpm5",
        "minimax-m2",
        "minimax-m3",
        "mistral",
        "muse",
        "nanbeige",
        "poolside_v1",
        "pythonic",
        "qwen",
        "qwen25",
        "qwen3_coder",
        "response_template",
        "spark25",
        "step3",
        "step3p5",
        "trinity",
    ),
    "unified-cache-external-linker-backend": ("dynamic", "mooncake", "mori"),
    "weight-cache-mode": ("client", "daemon", "off"),
}

_ONLY_7F8F030: dict[str, str] = {
    "int": """
        asr-max-buffer-seconds asr-max-concurrent-sessions batch-notify-size c128-page-size
        cuda-graph-max-bs cuda-graph-max-bs-decode cuda-graph-max-bs-prefill dcp-size
        decode-context-parallel-size decoupled-spec-rank detokenizer-worker-num
        disaggregation-decode-extra-slots dwdp-size elastic-ep-initial-size elastic-ep-join-rank-offset
        encoder-bootstrap-port fuseep-mode grpc-http-sidecar-port grpc-port http2-max-concurrent-streams
        int8-mamba-ckpt-size kv-canary-sweep-interval linear-replayssm-cache-len
        load-snapshot-publish-interval mamba-cache-philox-rounds mamba-max-states-per-path max-ep-size
        media-url-max-file-size-mb min-free-slots-delay mm-io-worker-num mm-preprocess-cache-size-mb
        mm-processor-worker-num optimistic-prefill-attempts piecewise-cuda-graph-max-tokens
        prefill-decode-interval smg-http-sidecar-port speculative-dflash-block-size
        speculative-dflash-draft-window-size speculative-draft-window-size speculative-dspark-block-size
        speculative-ngram-external-corpus-max-tokens speculative-ngram-external-sam-budget
        weight-cache-timeout weight-loader-prefetch-num-threads
    """,
    "float": """
        elastic-ep-scale-timeout lora-drain-wait-threshold prefill-delayer-max-delay-ms
        prefill-delayer-queue-min-ratio
    """,
    "switch": """
        collect-tokens-histogram dcp-replicate-q-proj debug-cuda-graph disable-attn-tp-gather
        disable-decode-cuda-graph disable-piecewise-cuda-graph disable-prefill-cuda-graph
        disaggregation-decode-enable-radix-cache dllm-fdfo elastic-ep-rejoin enable-breakable-cuda-graph
        enable-cp-decode-attn-tp enable-deepseek-v4-fp4-indexer enable-dp-attention-local-control-broadcast
        enable-dsa-cache-layer-split enable-dsa-prefill-context-parallel enable-expert-distribution-metrics
        enable-flexkv enable-forward-pass-metrics enable-gdn-replayssm-spec enable-http2
        enable-int8-mamba-checkpoint enable-linear-replayssm enable-linear-replayssm-spec
        enable-mamba-cache-stochastic-rounding enable-mis enable-nsa-prefill-context-parallel
        enable-page-major-kv-layout enable-prefill-context-parallel enable-prefill-cp
        enable-quant-communications enable-return-indexer-topk enable-scattered-sconv
        enable-session-radix-cache enable-strict-thinking enable-tf32-matmul enable-tp-lm-head-all-to-all
        enable-unified-memory enable-waterfill enforce-piecewise-cuda-graph enforce-shared-experts-fusion
        keep-mm-feature-on-device language-model-only lora-strict-loading lora-use-virtual-experts
        mlx-enable-sampling no-dcp-replicate-q-proj no-dllm-fdfo no-enable-tp-lm-head-all-to-all
        no-lora-strict-loading prefill-only-disable-kv-cache prefill-round-robin-balance smg-grpc-mode
        speculative-adaptive speculative-dspark-align-verify-tokens-to-graph-tier
        speculative-skip-dp-mlp-sync speculative-use-rejection-sampling stream-output strip-thinking-cache
        trust-mm-content-hashes weight-loader-drop-cache-after-load weight-loader-prefetch-checkpoints
    """,
    "int-list": """
        cuda-graph-bs cuda-graph-bs-decode cuda-graph-bs-prefill piecewise-cuda-graph-tokens
    """,
    "str-list": """
        allowed-media-domains encoder-register-urls flashinfer-autotune-skip-ops lora-target-modules
    """,
}
_ONLY_7F8F030_CHOICES: dict[str, tuple[str, ...]] = {
    "attention-backend": (
        "aiter",
        "ascend",
        "compressed",
        "cutedsl_mla",
        "cutlass_mla",
        "dsa",
        "dsv4",
        "dual_chunk_flash_attn",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "hpc_ops",
        "intel_amx",
        "intel_xpu",
        "nsa",
        "tokenspeed_mla",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "bf16-gemm-backend": ("auto", "cutedsl", "gemv", "torch"),
    "cp-strategy": ("interleave", "zigzag"),
    "cuda-graph-backend-decode": ("breakable", "disabled", "full", "tc_piecewise"),
    "cuda-graph-backend-prefill": ("breakable", "disabled", "full", "tc_piecewise"),
    "cuda-graph-tc-compiler": ("eager", "inductor"),
    "dcp-comm-backend": ("a2a", "ag_rs", "fi_a2a"),
    "decode-attention-backend": (
        "aiter",
        "ascend",
        "compressed",
        "cutedsl_mla",
        "cutlass_mla",
        "dsa",
        "dsv4",
        "dual_chunk_flash_attn",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "hpc_ops",
        "intel_amx",
        "intel_xpu",
        "nsa",
        "tokenspeed_mla",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "decoupled-spec-role": ("drafter", "null", "verifier"),
    "deepep-dispatcher-output-dtype": ("auto", "bf16", "fp8", "int8", "nvfp4"),
    "disaggregation-decode-retraction-backup": ("cpu_tensor", "host_pool"),
    "disaggregation-transfer-backend": ("ascend", "fake", "mooncake", "mooncake_tcp", "mori", "nixl"),
    "dsa-decode-backend": (
        "aiter",
        "fa3",
        "flashinfer_sparse_mla",
        "flashmla_auto",
        "flashmla_kv",
        "flashmla_sparse",
        "flashmla_sparse_q8",
        "tilelang",
        "trtllm",
    ),
    "dsa-paged-mqa-logits-backend": ("aiter", "auto", "cutedsl", "deepgemm"),
    "dsa-prefill-backend": (
        "aiter",
        "fa3",
        "flashinfer_sparse_mla",
        "flashmla_auto",
        "flashmla_kv",
        "flashmla_sparse",
        "flashmla_sparse_q8",
        "tilelang",
        "trtllm",
    ),
    "dsa-prefill-cp-mode": ("in-seq-split", "round-robin-split"),
    "dsa-topk-backend": ("flashinfer", "sgl-kernel", "torch"),
    "dsv4-prefill-backend": ("auto", "flashmla_sparse", "flashmla_sparse_q8"),
    "elastic-ep-join-mode": ("recover", "scale"),
    "encoder-transfer-backend": ("auto", "mooncake", "zmq_to_scheduler", "zmq_to_tokenizer"),
    "ep-dispatch-algorithm": ("dynamic", "fake", "lp", "static"),
    "expert-balancedness-report-mode": ("both", "off", "prometheus", "server_log"),
    "expert-distribution-recorder-mode": ("per_pass", "per_token", "stat", "stat_approx"),
    "flashinfer-allreduce-fusion-backend": ("auto", "mnnvl", "trtllm"),
    "flashinfer-mxfp4-moe-precision": ("bf16", "default"),
    "fp4-gemm-backend": (
        "auto",
        "flashinfer_cudnn",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_trtllm",
        "marlin",
    ),
    "fp8-gemm-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_deepgemm",
        "flashinfer_trtllm",
        "triton",
    ),
    "fuseep-mode": ("1", "2"),
    "hicache-host-memory-mode": ("buffer_only", "cache"),
    "hicache-storage-backend": (
        "aibrix",
        "dynamic",
        "eic",
        "file",
        "hf3fs",
        "mooncake",
        "mori",
        "nixl",
        "shm",
        "sim",
        "simm",
    ),
    "image-processor-backend": ("auto", "pil", "torchvision"),
    "kv-cache-dtype": (
        "auto",
        "bf16",
        "bfloat16",
        "fp4_e2m1",
        "fp4_mx_block16",
        "fp8_e4m3",
        "fp8_e5m2",
        "mxfp8",
        "nvfp4",
    ),
    "kv-canary": ("log", "none", "raise"),
    "kv-canary-real-data": ("all", "none", "partial"),
    "linear-attn-backend": ("cutedsl", "flashinfer", "flashkda", "helion", "nvidia_kda", "ptx_kda", "triton"),
    "linear-attn-decode-backend": ("cutedsl", "flashinfer", "flashkda", "helion", "nvidia_kda", "ptx_kda", "triton"),
    "linear-attn-prefill-backend": ("cutedsl", "flashinfer", "flashkda", "helion", "nvidia_kda", "ptx_kda", "triton"),
    "linear-attn-verify-backend": (
        "cutedsl",
        "flashinfer",
        "flashkda",
        "helion",
        "nv_cutedsl",
        "nvidia_kda",
        "ptx_kda",
        "triton",
    ),
    "load-format": (
        "auto",
        "bitsandbytes",
        "dummy",
        "fastsafetensors",
        "flash_rl",
        "gguf",
        "layered",
        "mistral",
        "npcache",
        "presharded",
        "private",
        "pt",
        "remote",
        "remote_instance",
        "runai_streamer",
        "safetensors",
        "sharded_state",
    ),
    "lora-backend": ("ascend", "csgmv", "torch_native", "triton"),
    "lora-target-modules": (
        "all",
        "down_proj",
        "embed_tokens",
        "gate_proj",
        "gate_up_proj",
        "k_proj",
        "kv_a_proj_with_mqa",
        "kv_b_proj",
        "lm_head",
        "o_proj",
        "q_a_proj",
        "q_b_proj",
        "q_proj",
        "qkv_proj",
        "qkvr",
        "up_proj",
        "v_proj",
        "weights_proj",
        "wk",
        "wo_ud",
        "wq_b",
    ),
    "mamba-radix-cache-strategy": ("auto", "extra_buffer", "extra_buffer_lazy", "no_buffer"),
    "mm-attention-backend": (
        "aiter_attn",
        "amx_attn",
        "ascend_attn",
        "fa3",
        "fa4",
        "flashinfer_cudnn",
        "sdpa",
        "triton_attn",
        "xpu_attn",
    ),
    "mm-feature-transport": ("cpu", "cuda_ipc", "cuda_vmm"),
    "mm-global-cache-backend": ("mooncake",),
    "moe-a2a-backend": (
        "ascend_fuseep",
        "ascend_tp",
        "deepep",
        "flashinfer",
        "megamoe",
        "mooncake",
        "mori",
        "nixl",
        "none",
        "pplx",
    ),
    "moe-runner-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "experimental_sgl_marlin",
        "experimental_sgl_trtllm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_mxfp4",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "hpc_ops",
        "humming",
        "marlin",
        "megamoe",
        "triton",
        "triton_kernel",
    ),
    "nsa-decode-backend": (
        "aiter",
        "fa3",
        "flashinfer_sparse_mla",
        "flashmla_auto",
        "flashmla_kv",
        "flashmla_sparse",
        "flashmla_sparse_q8",
        "tilelang",
        "trtllm",
    ),
    "nsa-prefill-backend": (
        "aiter",
        "fa3",
        "flashinfer_sparse_mla",
        "flashmla_auto",
        "flashmla_kv",
        "flashmla_sparse",
        "flashmla_sparse_q8",
        "tilelang",
        "trtllm",
    ),
    "nsa-prefill-cp-mode": ("in-seq-split", "round-robin-split"),
    "piecewise-cuda-graph-compiler": ("eager", "inductor"),
    "prefill-attention-backend": (
        "aiter",
        "ascend",
        "compressed",
        "cutedsl_mla",
        "cutlass_mla",
        "dsa",
        "dsv4",
        "dual_chunk_flash_attn",
        "fa3",
        "fa4",
        "flashinfer",
        "flashmla",
        "flex_attention",
        "hpc_ops",
        "intel_amx",
        "intel_xpu",
        "nsa",
        "tokenspeed_mla",
        "torch_native",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "wave",
    ),
    "prefill-cp-mode": ("in-seq-split",),
    "quantization": (
        "auto-round",
        "auto-round-int8",
        "awq",
        "awq_marlin",
        "bitsandbytes",
        "compressed-tensors",
        "fp8",
        "gguf",
        "gptq",
        "gptq_marlin",
        "humming",
        "marlin",
        "mlx_q4",
        "mlx_q8",
        "modelopt",
        "modelopt_fp4",
        "modelopt_fp8",
        "modelopt_mixed",
        "modelslim",
        "moe_wna16",
        "mxfp4",
        "mxfp8",
        "mxfp_w4a8",
        "nvfp4_online",
        "petit_nvfp4",
        "quark",
        "quark_int4fp8_moe",
        "quark_mxfp4",
        "unquant",
        "w4afp8",
        "w8a8_fp8",
        "w8a8_int8",
    ),
    "radix-eviction-policy": ("lfu", "lru", "priority", "slru"),
    "reasoning-parser": (
        "apertus2509",
        "auto",
        "cohere_command4",
        "deepseek-r1",
        "deepseek-v3",
        "deepseek-v4",
        "gemma4",
        "glm45",
        "gpt-oss",
        "hunyuan",
        "inkling",
        "interns1",
        "kimi",
        "kimi_k2",
        "kimi_k3",
        "mimo",
        "minimax",
        "minimax-append-think",
        "minimax-m3",
        "mistral",
        "muse",
        "nemotron_3",
        "poolside_v1",
        "qwen3",
        "qwen3-thinking",
        "step3",
        "step3p5",
    ),
    "retraction-policy": ("length", "priority"),
    "return-hidden-states-mode": ("full", "last"),
    "sampling-backend": ("ascend", "flashinfer", "pytorch"),
    "schedule-policy": ("dfs-weight", "fcfs", "lof", "lpm", "priority", "random", "routing-key"),
    "speculative-draft-kv-cache-dtype": ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"),
    "speculative-draft-load-format": (
        "auto",
        "bitsandbytes",
        "dummy",
        "fastsafetensors",
        "flash_rl",
        "gguf",
        "layered",
        "mistral",
        "npcache",
        "presharded",
        "private",
        "pt",
        "remote",
        "remote_instance",
        "runai_streamer",
        "safetensors",
        "sharded_state",
    ),
    "speculative-draft-model-quantization": (
        "auto-round",
        "auto-round-int8",
        "awq",
        "awq_marlin",
        "bitsandbytes",
        "compressed-tensors",
        "fp8",
        "gguf",
        "gptq",
        "gptq_marlin",
        "humming",
        "marlin",
        "mlx_q4",
        "mlx_q8",
        "modelopt",
        "modelopt_fp4",
        "modelopt_fp8",
        "modelopt_mixed",
        "modelslim",
        "moe_wna16",
        "mxfp4",
        "mxfp8",
        "mxfp_w4a8",
        "nvfp4_online",
        "petit_nvfp4",
        "quark",
        "quark_int4fp8_moe",
        "quark_mxfp4",
        "unquant",
        "w4afp8",
        "w8a8_fp8",
        "w8a8_int8",
    ),
    "speculative-moe-a2a-backend": (
        "ascend_fuseep",
        "ascend_tp",
        "deepep",
        "flashinfer",
        "megamoe",
        "mooncake",
        "mori",
        "nixl",
        "none",
        "pplx",
    ),
    "speculative-moe-runner-backend": (
        "aiter",
        "auto",
        "cutlass",
        "deep_gemm",
        "experimental_sgl_marlin",
        "experimental_sgl_trtllm",
        "flashinfer_cutedsl",
        "flashinfer_cutlass",
        "flashinfer_mxfp4",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "hpc_ops",
        "humming",
        "marlin",
        "megamoe",
        "triton",
        "triton_kernel",
    ),
    "startup-weight-load-mode": ("overlap", "serial"),
    "tokenizer-backend": ("fastokens", "huggingface"),
    "tool-call-parser": (
        "apertus2509",
        "auto",
        "cohere_command4",
        "deepseekv3",
        "deepseekv31",
        "deepseekv32",
        "deepseekv4",
        "gemma4",
        "gigachat3",
        "glm",
        "glm45",
        "glm47",
        "gpt-oss",
        "hermes",
        "hunyuan",
        "inkling",
        "interns1",
        "kimi_k2",
        "kimi_k3",
        "lfm2",
        "llama3",
        "mimo",
        "minicpm5",
        "minimax-m2",
        "minimax-m3",
        "mistral",
        "muse",
        "poolside_v1",
        "pythonic",
        "qwen",
        "qwen25",
        "qwen3_coder",
        "step3",
        "step3p5",
        "trinity",
    ),
    "weight-cache-mode": ("client", "daemon", "off"),
}


def _merge(*tables: dict[str, str]) -> dict[str, str]:
    return {name: kind for table in tables for kind, names in table.items() for name in names.split()}


TYPES: dict[str, dict[str, str]] = {
    "0.5.10": _merge(_COMMON, _ONLY_0_5_10),
    "0.5.23": _merge(_COMMON, _ONLY_0_5_23),
    "7f8f030": _merge(_COMMON, _ONLY_7F8F030),
}
CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "0.5.10": {**_COMMON_CHOICES, **_ONLY_0_5_10_CHOICES},
    "0.5.23": {**_COMMON_CHOICES, **_ONLY_0_5_23_CHOICES},
    "7f8f030": {**_COMMON_CHOICES, **_ONLY_7F8F030_CHOICES},
}
# what every known version agrees on: checked for a version this tool does not know
_COMMON_TYPES: dict[str, str] = _merge(_COMMON)


def _version_key(version: Optional[str]) -> Optional[str]:
    """The key of ``TYPES`` for an SGLang version (a known build's commit, a known release), else None."""

    if not version:
        return None
    for commit in KNOWN_BUILDS:
        if commit in version and commit in TYPES:
            return commit
    if version in TYPES:
        return version
    release, note = rules_version(version)
    return release if note is None and release in TYPES else None


def refusal(name: str, value: Any, version: Optional[str], takes_one_value: bool = False) -> Optional[tuple[str, str]]:
    """What SGLang ``version``'s argparse says of ``--name`` given ``value`` (a flag map's value: True
    a bare switch, a list several values), and the fix; None when it takes it, or when the flag's type
    is not known here. ``takes_one_value``: the flag is one of the version's with no listed type (it
    takes any one value, so a bare ``--name`` or a list is refused). The algorithm's spelling is left
    to the speculative rules (``sweep.sglang.serverargs``)."""
    key = _version_key(version)
    types = TYPES[key] if key else _COMMON_TYPES
    if name not in types and not takes_one_value:
        return None
    choices = CHOICES[key].get(name, ()) if key and name != "speculative-algorithm" else ()
    return _refused(name, value, types.get(name, "str"), choices)


_TYPE_WORDS = {"int": "an integer", "float": "a number", "int-list": "integers", "float-list": "numbers"}
_CONVERT = {"int": int, "float": float, "int-list": int, "float-list": float}


def _refused(name: str, value: Any, kind: str, choices: tuple[str, ...]) -> Optional[tuple[str, str]]:
    """What SGLang's argparse says of ``--name`` given ``value`` (as ``flag_args`` writes it into the
    argv), and the fix; None when it takes it. ``kind``: the flag's type (``str`` for a flag that takes
    any one value)."""
    if value is None or value is False:
        return None  # left out of the argv
    if kind == "switch":
        if value is True:
            return None
        return (
            f"unrecognized arguments: {' '.join(arg_values(value))}",
            f"--{name} takes no value: write {name}: true to pass it, or leave it out",
        )
    if value is True:
        if kind in ("optional", "str-list"):
            return None  # nargs '?' takes none; of the lists of strings, those of nargs '*' too
        return (
            f"argument --{name}: expected {'at least ' if kind.endswith('-list') else ''}one argument",
            f"give --{name} {_TYPE_WORDS.get(kind.removesuffix('-list'), 'a value')}, not true",
        )
    given = arg_values(value)
    if len(given) > 1 and not kind.endswith("-list"):
        return (f"unrecognized arguments: {' '.join(given[1:])}", f"--{name} takes one value, not a list")
    convert = _CONVERT.get(kind)
    for text in given:
        try:
            typed = convert(text) if convert else text
        except ValueError:
            return (
                f"argument --{name}: invalid {convert.__name__ if convert else 'str'} value: {text!r}",
                f"give --{name} {_TYPE_WORDS[kind]}, not {text!r}",
            )
        if choices and str(typed) not in choices:
            return (
                f"argument --{name}: invalid choice: {text!r} (choose from {', '.join(map(repr, choices))})",
                f"one of {', '.join(choices)}",
            )
    return None
