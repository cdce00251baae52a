// SGLang's csrc/cpu/x86_64/shm.h for an x86 CPU without AVX-512 (AMD EPYC Zen 3), used by the avx2
// kernel build of cluster/sglang-cpu-x86/install.sh in its place.
//
// The original implements the shared-memory collectives' reductions (tensor parallelism over
// processes on one host) with AVX-512 intrinsics under __attribute__((target("avx512bw"))): they
// are compiled in whatever -march says, are not dispatched at run time, and would die with SIGILL on
// an AVX2 CPU the first time TP > 1 reduces. Here the same four functions are plain loops
// (accumulate in fp32, as the original does), which -march=x86-64-v3 vectorizes with AVX2.
#pragma once
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

template <typename T>
inline void sweep_reduce_buffers(int start_elements, int num_elements, char* to_buffer, char** buffers, int world_size) {
  T* out = reinterpret_cast<T*>(to_buffer) + start_elements;
#pragma omp parallel for
  for (int e = 0; e < num_elements; e++) {
    float acc = static_cast<float>(reinterpret_cast<const T*>(buffers[0])[start_elements + e]);
    for (int j = 1; j < world_size; j++) {
      acc += static_cast<float>(reinterpret_cast<const T*>(buffers[j])[start_elements + e]);
    }
    out[e] = static_cast<T>(acc);
  }
}

inline void
reduce_bf16_buffers(int start_elements, int num_elements, char* to_buffer, char** buffers, int world_size) {
  sweep_reduce_buffers<at::BFloat16>(start_elements, num_elements, to_buffer, buffers, world_size);
}

inline void
reduce_fp16_buffers(int start_elements, int num_elements, char* to_buffer, char** buffers, int world_size) {
  sweep_reduce_buffers<at::Half>(start_elements, num_elements, to_buffer, buffers, world_size);
}

inline void
reduce_fp32_buffers(int start_elements, int num_elements, char* to_buffer, char** buffers, int world_size) {
  sweep_reduce_buffers<float>(start_elements, num_elements, to_buffer, buffers, world_size);
}

inline void parallel_memcpy(void* to, void* from, size_t n_bytes) {
  const size_t chunk = size_t(1) << 16;
  const long n_chunks = static_cast<long>((n_bytes + chunk - 1) / chunk);
#pragma omp parallel for
  for (long c = 0; c < n_chunks; c++) {
    const size_t off = static_cast<size_t>(c) * chunk;
    std::memcpy(static_cast<char*>(to) + off, static_cast<char*>(from) + off, std::min(chunk, n_bytes - off));
  }
}
