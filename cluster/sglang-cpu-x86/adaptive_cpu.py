"""Let the installed SGLang's adaptive speculation switch to 0 steps on the CPU engine.

    python cluster/sglang-cpu-x86/adaptive_cpu.py SITE     # SITE: site-packages holding sglang

``--speculative-adaptive`` with a tier whose candidate steps hold 0 ("no speculation at this batch
size") stops the CPU build's scheduler at the first such batch:
``RuntimeError: CHECK_EQ(candidates.scalar_type(), index_dtype) failed. Int vs Long`` in
``verify_tree_greedy_cpu``. At 0 steps ``EAGLEWorkerV2._build_trivial_verify_input`` verifies the
previous bonus token alone, and passes ``bonus_tokens`` (int32) as the draft tokens, where every
drafted batch passes int64 ones and the CPU kernel requires the dtype of the retrieve indices (int64;
CUDA's kernel takes either). The edit gives the 1-node tree its token as int64, the dtype a drafted
batch's tokens have on CPU: the same tokens, so greedy output is unchanged (checked by
tests/real/test_real_adaptive.py against the baseline, token for token).

Run by install.sh on every path, after torch_native_spec.py. Idempotent; exits 1 naming the file and
the snippet when SGLang's source is not what the edit expects.

Not changed here: the adaptive path also builds a CUDA-graph runner per candidate step count unless the
decode graph is disabled, and dies at startup on the CPU engine (``NotImplementedError`` in
``init_cuda_graph_state``). That one a flag avoids: CPU experiments pass ``disable-cuda-graph: true``
(the CPU engine captures no graph anyway: its log says ``cpu graph: False``), and the rule checker
asks for it.
"""

import os
import sys

from torch_native_spec import apply_edits, fail

TAG = "# sweep: cluster/sglang-cpu-x86/adaptive_cpu.py"

EDITS = {
    "sglang/srt/speculative/eagle_worker_v2.py": [
        (
            "        return EagleVerifyInput(\n"
            "            draft_token=draft_input.bonus_tokens,\n",
            "        return EagleVerifyInput(\n"
            f"            {TAG}: int64 like a drafted batch's tokens (the CPU kernel checks)\n"
            "            draft_token=draft_input.bonus_tokens.to(retrieve_index.dtype),\n",
        ),
    ],
}


def main(site: str) -> int:
    if not os.path.isdir(os.path.join(site, "sglang")):
        fail(f"no sglang package in {site}", "adaptive_cpu")
    changed = apply_edits(site, EDITS, "adaptive_cpu")
    what = ", ".join(os.path.relpath(p, site) for p in changed) if changed else "nothing (already patched)"
    print(f"[adaptive_cpu] adaptive speculation at 0 steps on CPU: changed {what}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: adaptive_cpu.py SITE_PACKAGES", "adaptive_cpu")
    sys.exit(main(sys.argv[1]))
