"""Every flag of ``launch_server`` per SGLang version, read from each release's own parser
(``ServerArgs.add_cli_args``; 0.5.10 and 0.5.23 from the registry, 7f8f030 from the CPU build). Data only.

The plan uses it the way argparse does: an exact name, or a unique prefix of one (argparse's
``allow_abbrev``), or an error. Regenerate with tests/real/test_rules_differential.py's ``dump_flags``.
"""

from __future__ import annotations

_COMMON = """
    abort-on-priority-when-disabled admin-api-key allow-auto-truncate api-key attention-backend
    attention-context-parallel-size attn-cp-size base-gpu-id bucket-e2e-request-latency
    bucket-inter-token-latency bucket-time-to-first-token chat-template
    checkpoint-engine-wait-weights-before-ready chunked-prefill-size completion-template config
    constrained-json-disable-any-whitespace constrained-json-whitespace-pattern context-length
    cpu-offload-gb crash-dump-folder custom-weight-loader data-parallel-size
    debug-tensor-dump-input-file debug-tensor-dump-layers debug-tensor-dump-output-folder
    decode-attention-backend decode-log-interval decrypted-config-file decrypted-draft-config-file
    deepep-config deepep-mode default-priority-value delete-ckpt-after-loading device
    disable-chunked-prefix-cache disable-cuda-graph disable-cuda-graph-padding disable-custom-all-reduce
    disable-fast-image-processor disable-flashinfer-autotune
    disable-flashinfer-cutlass-moe-fp4-allgather disable-hybrid-swa-memory disable-outlines-disk-cache
    disable-overlap-schedule disable-priority-preemption disable-radix-cache
    disable-shared-experts-fusion disable-tokenizer-batch-decode disaggregation-bootstrap-port
    disaggregation-decode-enable-offload-kvcache disaggregation-decode-polling-interval
    disaggregation-ib-device disaggregation-mode disaggregation-transfer-backend dist-init-addr
    dist-timeout dllm-algorithm dllm-algorithm-config download-dir dp-size dtype
    dynamic-batch-tokenizer-batch-size dynamic-batch-tokenizer-batch-timeout elastic-ep-backend
    enable-adaptive-dispatch-to-encoder enable-aiter-allreduce-fusion enable-attn-tp-input-scattered
    enable-broadcast-mm-inputs-process enable-cache-report enable-cudagraph-gc
    enable-custom-logit-processor enable-deterministic-inference enable-dp-attention enable-dp-lm-head
    enable-draft-weights-cpu-backup enable-dynamic-batch-tokenizer enable-dynamic-chunking
    enable-elastic-expert-backup enable-eplb enable-flashinfer-allreduce-fusion enable-fp32-lm-head
    enable-fused-moe-sum-all-reduce enable-fused-qk-norm-rope enable-hierarchical-cache enable-hisparse
    enable-layerwise-nvtx-marker enable-lmcache enable-lora enable-lora-overlap-loading
    enable-memory-saver enable-metrics enable-metrics-for-all-schedulers enable-mfu-metrics
    enable-mixed-chunk enable-mm-global-cache enable-mscclpp enable-multi-layer-eagle enable-multimodal
    enable-nccl-nvls enable-p2p-check enable-pdmux enable-precise-embedding-interpolation
    enable-prefill-delayer enable-prefix-mm-cache enable-priority-scheduling enable-profile-cuda-graph
    enable-request-time-stats-logging enable-return-hidden-states enable-return-routed-experts
    enable-single-batch-overlap enable-ssl-refresh enable-streaming-session enable-symm-mem
    enable-tokenizer-batch-encode enable-torch-compile enable-torch-compile-debug-mode
    enable-torch-symm-mem enable-trace enable-two-batch-overlap enable-weights-cpu-backup encoder-only
    encoder-transfer-backend encoder-urls enforce-disable-flashinfer-allreduce-fusion
    engine-info-bootstrap-port ep ep-dispatch-algorithm ep-num-redundant-experts ep-size eplb-algorithm
    eplb-min-rebalancing-utilization-threshold eplb-rebalance-layers-per-chunk
    eplb-rebalance-num-iterations expert-distribution-recorder-buffer-size
    expert-distribution-recorder-mode expert-parallel-size experts-shared-outer-loras
    export-metrics-to-file export-metrics-to-file-dir extra-metric-labels fastapi-root-path
    file-storage-path flashinfer-mla-disable-ragged flashinfer-mxfp4-moe-precision forward-hooks
    fp4-gemm-backend fp8-gemm-backend gc-threshold gc-warning-threshold-secs generation-tokens-buckets
    gpu-id-step grammar-backend grpc-mode help hf-chat-template-name hicache-io-backend
    hicache-mem-layout hicache-ratio hicache-size hicache-storage-backend
    hicache-storage-backend-extra-config hicache-storage-prefetch-policy hicache-write-policy
    hisparse-config host incremental-streaming-output init-expert-location is-embedding
    json-model-override-args kt-cpuinfer kt-max-deferred-experts-per-token kt-method kt-num-gpu-experts
    kt-threadpool-count kt-weight-path kv-cache-dtype kv-events-config language-only
    limit-mm-data-per-request linear-attn-backend linear-attn-decode-backend linear-attn-prefill-backend
    load-balance-method load-format log-level log-level-http log-requests log-requests-format
    log-requests-level log-requests-target lora-backend lora-eviction-policy lora-paths
    lora-target-modules mamba-backend mamba-full-memory-ratio mamba-ssm-dtype mamba-track-interval
    max-loaded-loras max-lora-chunk-size max-lora-rank max-loras-per-batch max-mamba-cache-size
    max-prefill-tokens max-queued-requests max-running-requests max-total-tokens mem-fraction-static
    mm-attention-backend mm-enable-dp-encoder mm-process-config model model-checksum model-impl
    model-loader-extra-config model-path modelexpress-config modelopt-checkpoint-restore-path
    modelopt-checkpoint-save-path modelopt-export-path modelopt-quant moe-a2a-backend
    moe-data-parallel-size moe-dense-tp-size moe-dp-size moe-runner-backend mooncake-ib-device
    nccl-init-addr nccl-port nnodes no-experts-shared-outer-loras node-rank num-continuous-decode-steps
    num-reserved-decode-tokens numa-node offload-group-size offload-mode offload-num-in-group
    offload-prefetch-step otlp-traces-endpoint page-size pdmux-config-path pipeline-parallel-size port
    pp-async-batch-depth pp-max-micro-batch-size pp-size pre-warm-nccl preferred-sampling-params
    prefill-attention-backend prefill-delayer-forward-passes-buckets prefill-delayer-max-delay-passes
    prefill-delayer-token-usage-low-watermark prefill-delayer-wait-seconds-buckets prefill-max-requests
    priority-scheduling-preemption-threshold prompt-tokens-buckets quantization quantization-param-path
    quantize-and-serve radix-eviction-policy random-seed reasoning-parser
    remote-instance-weight-loader-backend remote-instance-weight-loader-seed-instance-ip
    remote-instance-weight-loader-seed-instance-service-port
    remote-instance-weight-loader-send-weights-group-ports
    remote-instance-weight-loader-start-seed-via-transfer-engine revision rl-on-policy-target
    rl-quant-profile sampling-backend sampling-defaults schedule-conservativeness
    schedule-low-priority-values-first schedule-policy scheduler-recv-interval served-model-name
    show-time-cost skip-server-warmup skip-tokenizer-init sleep-on-idle sm-group-num
    soft-watchdog-timeout speculative-accept-threshold-acc speculative-accept-threshold-single
    speculative-algorithm speculative-attention-mode speculative-draft-attention-backend
    speculative-draft-load-format speculative-draft-model speculative-draft-model-path
    speculative-draft-model-quantization speculative-draft-model-revision speculative-eagle-topk
    speculative-moe-a2a-backend speculative-moe-runner-backend speculative-ngram-capacity
    speculative-ngram-match-type speculative-ngram-max-bfs-breadth speculative-ngram-max-trie-depth
    speculative-ngram-min-bfs-breadth speculative-num-draft-tokens speculative-num-steps
    speculative-token-map ssl-ca-certs ssl-certfile ssl-keyfile ssl-keyfile-password stream-interval
    stream-response-default-include-usage swa-full-tokens-ratio tbo-token-distribution-threshold
    tensor-parallel-size tokenizer-metrics-allowed-custom-labels tokenizer-metrics-custom-labels-header
    tokenizer-mode tokenizer-path tokenizer-worker-num tool-call-parser tool-server torch-compile-max-bs
    tp-size triton-attention-num-kv-splits triton-attention-reduce-in-fp32
    triton-attention-split-tile-size trust-remote-code use-ray uvicorn-access-log-exclude-prefixes
    warmups watchdog-timeout weight-loader-disable-mmap weight-version
""".split()

_ONLY_0_5_10 = """
    collect-tokens-histogram cuda-graph-bs cuda-graph-max-bs custom-sigquit-handler
    debug-tensor-dump-inject disable-piecewise-cuda-graph ds-channel-config-path ds-heavy-channel-num
    ds-heavy-channel-type ds-heavy-token-num ds-sparse-decode-threshold enable-double-sparsity
    enable-expert-distribution-metrics enable-nan-detection enable-nsa-prefill-context-parallel
    enable-piecewise-cuda-graph enable-prefill-context-parallel enforce-piecewise-cuda-graph
    hybrid-kvcache-ratio keep-mm-feature-on-device mamba-scheduler-strategy multi-item-scoring-delimiter
    nsa-decode-backend nsa-prefill-backend nsa-prefill-cp-mode piecewise-cuda-graph-compiler
    piecewise-cuda-graph-max-tokens piecewise-cuda-graph-tokens prefill-cp-mode
    prefill-round-robin-balance stream-output torchao-config
""".split()

_ONLY_0_5_23 = """
    allowed-media-domains asr-max-buffer-seconds asr-max-concurrent-sessions
    attention-data-parallel-size attn-dp-size batch-notify-size bf16-gemm-backend boundary-reduction
    c128-page-size constrained-json-max-whitespace-cnt context-bucket cp-strategy
    cuda-graph-backend-decode cuda-graph-backend-prefill cuda-graph-bs-decode cuda-graph-bs-prefill
    cuda-graph-config cuda-graph-max-bs-decode cuda-graph-max-bs-prefill cuda-graph-max-seq-len-prefill
    cuda-graph-prefill-max-context dcp-comm-backend dcp-replicate-q-proj dcp-size debug-cuda-graph
    decode-context-parallel-size decoupled-spec-bind-endpoint decoupled-spec-connect-endpoints
    decoupled-spec-rank decoupled-spec-role deepep-dispatcher-output-dtype deepep-v2-mode
    default-chat-template-kwargs detokenizer-worker-num disable-aiter-allreduce-fusion-in-decode
    disable-aiter-allreduce-fusion-in-prefill disable-attn-tp-gather disable-decode-cuda-graph
    disable-prefill-cuda-graph disaggregation-decode-allocation-policy
    disaggregation-decode-enable-radix-cache disaggregation-decode-extra-slots
    disaggregation-decode-host-receive-threshold disaggregation-decode-retraction-backup
    disaggregation-enable-kv-checksum dllm-fdfo dsa-decode-backend dsa-paged-mqa-logits-backend
    dsa-prefill-backend dsa-topk-backend dsa-triton-union dsv4-attn-backend dsv4-prefill-backend
    dwdp-size elastic-ep-initial-size elastic-ep-join-mode elastic-ep-join-rank-offset
    elastic-ep-scale-timeout enable-amd-monokernel enable-cp-decode-attn-tp
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
    enable-w4a4-mxfp4-megamoe enable-waterfill enable-watermark encoder-bootstrap-port
    encoder-register-urls enforce-shared-experts-fusion expert-balancedness-report-mode
    flashinfer-a2a-dispatch-type flashinfer-allreduce-fusion-backend flashinfer-autotune-skip-ops
    flexkv-config-file forward-pass-metrics-ipc-name forward-pass-metrics-worker-id fuseep-mode
    gated-launch-port grpc-http-sidecar-port grpc-port grpc-response-timeout-secs
    hicache-host-memory-fraction hicache-host-memory-mode hicache-storage-prefetch-retry-max-attempts
    hicache-storage-prefetch-retry-poll-interval hierarchical-sparse-attention-extra-config
    http2-initial-connection-window-size http2-max-concurrent-streams image-processor-backend
    int8-mamba-ckpt-size kv-canary kv-canary-real-data kv-canary-sweep-interval language-model-only
    linear-attn-verify-backend linear-replayssm-cache-len lmcache-config-file load-publish-endpoint
    load-snapshot-publish-interval lora-drain-wait-threshold lora-strict-loading
    lora-use-virtual-experts mamba-cache-philox-rounds mamba-max-states-per-path
    mamba-radix-cache-strategy max-ep-size media-url-max-file-size-mb min-free-slots-delay
    mlx-enable-sampling mm-feature-transport mm-global-cache-backend mm-io-worker-num
    mm-preprocess-cache-size-mb mm-processor-worker-num model-config-parser monokernel-backend
    msprobe-dump-config no-dcp-replicate-q-proj no-dllm-fdfo no-enable-decoder-swa-bounded-replay
    no-enable-dsa-fused-indexer no-enable-fused-qk-norm-rope no-enable-tf32-matmul
    no-enable-tp-lm-head-all-to-all no-lora-strict-loading no-mm-enable-dp-encoder
    no-ple-offload-embedding no-speculative-enable-w4a4-mxfp4-megamoe optimistic-prefill-attempts
    otlp-service-name paged-experts-num-resident ple-offload-backend ple-offload-dir
    ple-offload-embedding prefill-decode-interval prefill-decode-interval-min-bs
    prefill-delayer-max-delay-ms prefill-delayer-queue-min-ratio prefill-kv-cache-dequant-dtype
    prefill-only-disable-kv-cache qsa-indexer-dtype radix-cache-backend radix-eviction-policy-config
    retraction-policy return-aux-hidden-state-layer-ids return-hidden-states-mode return-input-ids
    return-output-ids sampling-mask-max-tokens shared-experts-tp-size sidecar sidecar-args smg-grpc-mode
    smg-http-sidecar-port spec-trace-dir speculative-adaptive speculative-adaptive-config
    speculative-dflash-block-size speculative-domino-candidate-pool-size
    speculative-draft-kv-cache-dtype speculative-draft-sink-size speculative-draft-window-size
    speculative-dsa-topk-backend speculative-dspark-align-verify-tokens-to-graph-tier
    speculative-dspark-block-size speculative-dspark-confidence-sts-path
    speculative-dspark-sps-table-path speculative-enable-w4a4-mxfp4-megamoe
    speculative-ngram-external-corpus-max-tokens speculative-ngram-external-corpus-path
    speculative-ngram-external-sam-budget speculative-use-block-verification
    speculative-use-rejection-sampling startup-weight-load-mode strip-thinking-cache swa-prefix-tails
    tokenizer-backend trace-modules trust-mm-content-hashes trust-request-chat-template
    unified-cache-external-linker-backend unified-cache-external-linker-config uno-lora-path
    watermark-config weight-cache-mode weight-cache-socket weight-cache-timeout
    weight-loader-drop-cache-after-load weight-loader-prefetch-checkpoints
    weight-loader-prefetch-num-threads
""".split()

_ONLY_7F8F030 = """
    allowed-media-domains asr-max-buffer-seconds asr-max-concurrent-sessions batch-notify-size
    bf16-gemm-backend c128-page-size collect-tokens-histogram cp-strategy cuda-graph-backend-decode
    cuda-graph-backend-prefill cuda-graph-bs cuda-graph-bs-decode cuda-graph-bs-prefill
    cuda-graph-config cuda-graph-max-bs cuda-graph-max-bs-decode cuda-graph-max-bs-prefill
    cuda-graph-tc-compiler dcp-comm-backend dcp-replicate-q-proj dcp-size debug-cuda-graph
    decode-context-parallel-size decoupled-spec-bind-endpoint decoupled-spec-connect-endpoints
    decoupled-spec-rank decoupled-spec-role deepep-dispatcher-output-dtype default-chat-template-kwargs
    detokenizer-worker-num disable-attn-tp-gather disable-decode-cuda-graph disable-piecewise-cuda-graph
    disable-prefill-cuda-graph disaggregation-decode-enable-radix-cache
    disaggregation-decode-extra-slots disaggregation-decode-retraction-backup dllm-fdfo
    dsa-decode-backend dsa-paged-mqa-logits-backend dsa-prefill-backend dsa-prefill-cp-mode
    dsa-topk-backend dsv4-prefill-backend dwdp-size elastic-ep-initial-size elastic-ep-join-mode
    elastic-ep-join-rank-offset elastic-ep-rejoin elastic-ep-scale-timeout enable-breakable-cuda-graph
    enable-cp-decode-attn-tp enable-deepseek-v4-fp4-indexer enable-dp-attention-local-control-broadcast
    enable-dsa-cache-layer-split enable-dsa-prefill-context-parallel enable-expert-distribution-metrics
    enable-flexkv enable-forward-pass-metrics enable-gdn-replayssm-spec enable-http2
    enable-int8-mamba-checkpoint enable-linear-replayssm enable-linear-replayssm-spec
    enable-mamba-cache-stochastic-rounding enable-mis enable-nsa-prefill-context-parallel
    enable-page-major-kv-layout enable-prefill-context-parallel enable-prefill-cp
    enable-quant-communications enable-return-indexer-topk enable-scattered-sconv
    enable-session-radix-cache enable-strict-thinking enable-tf32-matmul enable-tp-lm-head-all-to-all
    enable-unified-memory enable-waterfill encoder-bootstrap-port encoder-register-urls
    enforce-piecewise-cuda-graph enforce-shared-experts-fusion expert-balancedness-report-mode
    flashinfer-allreduce-fusion-backend flashinfer-autotune-skip-ops flexkv-config-file
    forward-pass-metrics-ipc-name forward-pass-metrics-worker-id fuseep-mode grpc-http-sidecar-port
    grpc-port hicache-host-memory-mode hierarchical-sparse-attention-extra-config
    http2-max-concurrent-streams image-processor-backend int8-mamba-ckpt-size keep-mm-feature-on-device
    kv-canary kv-canary-real-data kv-canary-sweep-interval language-model-only
    linear-attn-verify-backend linear-replayssm-cache-len lmcache-config-file
    load-snapshot-publish-interval lora-drain-wait-threshold lora-strict-loading
    lora-use-virtual-experts mamba-cache-philox-rounds mamba-max-states-per-path
    mamba-radix-cache-strategy mamba-scheduler-strategy max-ep-size media-url-max-file-size-mb
    min-free-slots-delay mlx-enable-sampling mm-feature-transport mm-global-cache-backend
    mm-io-worker-num mm-preprocess-cache-size-mb mm-processor-worker-num model-config-parser
    msprobe-dump-config no-dcp-replicate-q-proj no-dllm-fdfo no-enable-tp-lm-head-all-to-all
    no-lora-strict-loading nsa-decode-backend nsa-prefill-backend nsa-prefill-cp-mode
    optimistic-prefill-attempts piecewise-cuda-graph-compiler piecewise-cuda-graph-max-tokens
    piecewise-cuda-graph-tokens prefill-cp-mode prefill-decode-interval prefill-delayer-max-delay-ms
    prefill-delayer-queue-min-ratio prefill-only-disable-kv-cache prefill-round-robin-balance
    radix-cache-backend retraction-policy return-hidden-states-mode sidecar sidecar-args smg-grpc-mode
    smg-http-sidecar-port spec-trace-dir speculative-adaptive speculative-adaptive-config
    speculative-dflash-block-size speculative-dflash-draft-window-size speculative-draft-kv-cache-dtype
    speculative-draft-window-size speculative-dspark-align-verify-tokens-to-graph-tier
    speculative-dspark-block-size speculative-dspark-confidence-sts-path
    speculative-dspark-sps-table-path speculative-ngram-external-corpus-max-tokens
    speculative-ngram-external-corpus-path speculative-ngram-external-sam-budget
    speculative-skip-dp-mlp-sync speculative-use-rejection-sampling startup-weight-load-mode
    stream-output strip-thinking-cache tokenizer-backend trace-modules trust-mm-content-hashes
    weight-cache-mode weight-cache-socket weight-cache-timeout weight-loader-drop-cache-after-load
    weight-loader-prefetch-checkpoints weight-loader-prefetch-num-threads
""".split()

FLAGS: dict[str, frozenset[str]] = {
    "0.5.10": frozenset(_COMMON + _ONLY_0_5_10),
    "0.5.23": frozenset(_COMMON + _ONLY_0_5_23),
    "7f8f030": frozenset(_COMMON + _ONLY_7F8F030),
}
