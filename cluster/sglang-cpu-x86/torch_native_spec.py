"""Teach the installed SGLang's torch_native attention backend speculative decoding.

    python cluster/sglang-cpu-x86/torch_native_spec.py SITE     # SITE: site-packages holding sglang

Run by install.sh on every path (one SGLang tree serves them all; nothing changes for a server
that does not use torch_native). What it does to SITE/sglang (module docstring of
torch_native_spec_backend.py for the attention itself):

1. copies ``torch_native_spec_backend.py`` (next to this script) into
   ``sglang/srt/layers/attention/``: ``TorchNativeSpecAttnBackend`` (torch_native plus target
   verify and draft extend, and draft decode as a step) and ``TorchNativeMultiStepDraftBackend``;
2. ``srt/layers/attention/attention_registry.py``: ``--attention-backend torch_native`` builds
   ``TorchNativeSpecAttnBackend`` (same code as before for plain prefill/decode);
3. ``srt/speculative/draft_utils.py``: the EAGLE draft backend factory gets ``torch_native``
   entries for the multi-step draft decode and for draft extend (without them EAGLE/EAGLE3 stop
   at startup: ``EAGLE is not supported in decode attention backend torch_native``).

Idempotent: a second run finds every edit in place and changes nothing. When SGLang's source is
not what the edits expect it exits 1 naming the file and the snippet.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "torch_native_spec_backend.py"
TAG = "# sweep: cluster/sglang-cpu-x86/torch_native_spec.py"

EDITS = {
    "sglang/srt/layers/attention/attention_registry.py": [
        (
            "    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend\n"
            "\n"
            "    return TorchNativeAttnBackend(runner)\n",
            f"    {TAG}: torch_native with the speculative passes\n"
            "    from sglang.srt.layers.attention.torch_native_spec_backend import (\n"
            "        TorchNativeSpecAttnBackend,\n"
            "    )\n"
            "\n"
            "    return TorchNativeSpecAttnBackend(runner)\n",
        ),
    ],
    "sglang/srt/speculative/draft_utils.py": [
        (
            '            "intel_amx": self._create_intel_amx_decode_backend,\n',
            '            "intel_amx": self._create_intel_amx_decode_backend,\n'
            f'            "torch_native": self._create_torch_native_decode_backend,  {TAG}\n',
        ),
        (
            '            "intel_amx": self._create_intel_amx_prefill_backend,\n',
            '            "intel_amx": self._create_intel_amx_prefill_backend,\n'
            f'            "torch_native": self._create_torch_native_prefill_backend,  {TAG}\n',
        ),
        (
            "    def _create_hybrid_linear_attn_decode_backend(self):\n",
            f"    {TAG}: torch_native's draft backends\n"
            "    def _create_torch_native_decode_backend(self):\n"
            "        from sglang.srt.layers.attention.torch_native_spec_backend import (\n"
            "            TorchNativeMultiStepDraftBackend,\n"
            "        )\n"
            "\n"
            "        return (\n"
            '            "torch_native",\n'
            "            TorchNativeMultiStepDraftBackend(\n"
            "                self.draft_model_runner, self.topk, self.speculative_num_steps\n"
            "            ),\n"
            "        )\n"
            "\n"
            "    def _create_torch_native_prefill_backend(self):\n"
            "        from sglang.srt.layers.attention.torch_native_spec_backend import (\n"
            "            TorchNativeSpecAttnBackend,\n"
            "        )\n"
            "\n"
            '        return ("torch_native", TorchNativeSpecAttnBackend(self.draft_model_runner))\n'
            "\n"
            "    def _create_hybrid_linear_attn_decode_backend(self):\n",
        ),
    ],
}


def fail(msg: str, who: str = "torch_native_spec"):
    print(f"[{who}] {msg}", file=sys.stderr)
    sys.exit(1)


def apply_edits(site: str, edits: dict, who: str) -> list:
    """Each (old, new) snippet of ``edits`` ({path under SITE: [(old, new), ...]}) replaced once, where
    ``new`` is not there yet; exits 1 naming the file and the snippet when SGLang's source is not what
    the edit expects. The files changed."""
    changed = []
    for rel, pairs in edits.items():
        path = os.path.join(site, rel)
        if not os.path.exists(path):
            fail(f"{path} is missing", who)
        text = original = open(path).read()
        for old, new in pairs:
            if new in text:
                continue
            if text.count(old) != 1:
                fail(
                    f"{path}: expected exactly one {old!r} "
                    f"(found {text.count(old)}); SGLang changed, update "
                    f"cluster/sglang-cpu-x86/{who}.py", who
                )
            text = text.replace(old, new)
        if text != original:
            with open(path, "w") as f:
                f.write(text)
            changed.append(path)
    return changed


def main(site: str) -> int:
    pkg = os.path.join(site, "sglang")
    if not os.path.isdir(pkg):
        fail(f"no sglang package in {site}")
    changed = []

    src = open(os.path.join(HERE, MODULE)).read()
    dst = os.path.join(pkg, "srt/layers/attention", MODULE)
    if not os.path.exists(dst) or open(dst).read() != src:
        with open(dst, "w") as f:
            f.write(src)
        changed.append(dst)
    changed += apply_edits(site, EDITS, "torch_native_spec")

    what = ", ".join(os.path.relpath(p, site) for p in changed) if changed else "nothing (already patched)"
    print(f"[torch_native_spec] torch_native speculative decoding: changed {what}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: torch_native_spec.py SITE_PACKAGES")
    sys.exit(main(sys.argv[1]))
