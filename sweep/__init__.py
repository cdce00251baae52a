"""sweep: find the best speculative-decoding setup for an SGLang server."""

__version__ = "0.1.0"
