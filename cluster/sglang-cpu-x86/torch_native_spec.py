"""Placeholder: teaches SGLang's torch_native attention backend the speculative passes (work in progress)."""
import sys

if __name__ == "__main__":
    sys.exit(0)
