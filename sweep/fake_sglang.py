"""``python -m sweep.fake_sglang ...``: the fake SGLang server (see :mod:`sweep.sglang.fake`)."""

from sweep.sglang.fake.main import main

if __name__ == "__main__":
    raise SystemExit(main())
