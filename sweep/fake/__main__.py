"""``python -m sweep.fake ...``: the fake SGLang server (see :mod:`sweep.fake`)."""

from sweep.fake.main import main

if __name__ == "__main__":
    raise SystemExit(main())
