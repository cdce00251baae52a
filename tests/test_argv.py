from sweep.core.argv import argv_value


def test_argv_value_forms_and_last_wins():
    argv = ["python", "-m", "sglang.launch_server", "--port", "1", "--tp-size=8", "--port=3", "--host"]
    assert argv_value(argv, "--port") == "3"
    assert argv_value(argv, "--tp-size") == "8"
    assert argv_value(argv, "--host") is None  # no value after it
    assert argv_value(argv, "--tp") is None  # a prefix is not the flag
    assert argv_value(None, "--port") is None
    assert argv_value(["--model", "/a", "--model-path", "/b"], "--model-path", "--model") == "/b"
    assert argv_value(["--model-path", "/b", "--model=/a"], "--model-path", "--model") == "/a"
