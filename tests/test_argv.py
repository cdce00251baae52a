from sweep.core.argv import flags_of_argv
from tests.argvs import argv_value


def test_argv_value_forms_and_last_wins():
    argv = ["python", "-m", "sglang.launch_server", "--port", "1", "--tp-size=8", "--port=3", "--host"]
    assert argv_value(argv, "--port") == "3"
    assert argv_value(argv, "--tp-size") == "8"
    assert argv_value(argv, "--host") is None  # no value after it
    assert argv_value(argv, "--tp") is None  # a prefix is not the flag
    assert argv_value(None, "--port") is None
    assert argv_value(["--model", "/a", "--model-path", "/b"], "--model-path", "--model") == "/b"
    assert argv_value(["--model-path", "/b", "--model=/a"], "--model-path", "--model") == "/a"


def test_flags_of_an_argv_as_the_flags_column_keeps_them():
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size=8", "--enable-dp-attention"]
    argv += ["--cuda-graph-bs", "1", "2", "--port", "1", "--trust-remote-code", "--port=3"]
    assert flags_of_argv(argv) == {
        "model-path": "/m",
        "tp-size": "8",
        "enable-dp-attention": "true",
        "cuda-graph-bs": "1 2",
        "trust-remote-code": "true",
        "port": "3",  # the last wins, in its place
    }
    assert flags_of_argv(None) == {} and flags_of_argv(["python"]) == {}
