"""A Ray cluster of network namespaces on one machine: a head and three GPU hosts, each in a
network namespace of its own with its own IP on one bridge, started with the project's own
``cluster/host-bootstrap.sh`` (token authentication on), and the faults real hosts have.

    python -m tests.cluster.netns up       # bring it up and leave it running (prints how to reach it)
    python -m tests.cluster.netns down     # remove what ``up`` left running and what killed runs left

Every name it makes on the machine carries the run's tag (the pid of the process that made the
cluster, in hex, and two random hex digits), so that two runs on one machine never touch each
other's: namespaces ``swnt<tag>-head``, ``swnt<tag>-h1`` ..., the bridge ``swnt<tag>-br``, the veth
ends ``swnt<tag>-hd``, ``swnt<tag>-h1`` ..., a marker in every process's environment, and one
directory, ``/tmp/sweep-netns-<tag>`` (Ray's temp dirs, each node's HOME and sweep cache, the token,
results). The bridge has no address in the root namespace and no uplink, so nothing sent in the
cluster leaves it. Two runs' namespaces, each run's on a bridge of its own, could even use the same
addresses without meeting, but each run takes a /24 of 10.231.0.0/16 that, when it picks one, no
address or route of this machine and no other run's namespace has: an address names its run.
Cleaning up removes only this run's things; what a run whose process is gone left (a killed run) is
removed when the next one starts, never what a live run has (nor what ``up`` left running).

The namespaces separate the network, and each host gets a /dev/shm of its own (a private mount
namespace: SGLang, like vLLM, decides which ranks share a machine by whether they can open each
other's shared memory). Otherwise every node shares this machine's process table, filesystem and
hostname (like containers cloned from one image). That is why Ray is never stopped with
``ray stop`` here (it kills every raylet it can see) but by the pids ``ip netns pids`` lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PREFIX = "swnt"  # every name: PREFIX + tag + "-" + what (a link's name has at most 15 characters)
TAG = f"{os.getpid():x}{secrets.token_hex(1)}"  # this run's: at most 6 + 2 hex digits (pid_max is 2**22)
ROOTS = "/tmp/sweep-netns-"  # + tag: each run's directory
ROOT = Path(f"{ROOTS}{TAG}")
MARK = "SWEEP_NETNS_HARNESS"  # <tag>/<node>, in the environment of every process started in a namespace
SUBNETS = "10.231"  # each run takes 10.231.X.0/24 (private, only inside its namespaces)
RAY_PORT = 6379
DASHBOARD = "http://127.0.0.1:8265"  # the head's job server, reached from inside the head's namespace
HOSTS = ("h1", "h2", "h3")
# the venv every node runs (host-bootstrap.sh activates it): the one running this, as on CI
VENV = Path(sys.prefix) if (Path(sys.prefix) / "bin" / "activate").is_file() else REPO / ".venv"
OBJECT_STORE = "80000000"
SHM_SIZE = "2g"
# How fast the head declares a silent host dead. Ray's defaults (a check every 3 s, 10 s timeout,
# 5 misses) take about 65 s for a host whose link is cut; these take about 15 s. A killed raylet or
# host is noticed at once either way: its connections are reset.
HEALTH_CHECK = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}


def name(what: str, tag: str = TAG) -> str:
    return f"{PREFIX}{tag}-{what}"


_NAME = re.compile(rf"{PREFIX}([0-9a-f]+[0-9a-f]{{2}})-(.+)")


def tag_of(a_name: str) -> str | None:
    """The tag in a name this harness made (None for any other name)."""
    m = _NAME.fullmatch(a_name)
    return m.group(1) if m else None


BRIDGE = name("br")


def ip_of(node: str) -> str:
    return f"{subnet()}.10" if node == "head" else f"{subnet()}.{10 + int(node[1:])}"


def ns_of(node: str) -> str:
    return name(node)


def veth_of(node: str) -> str:
    """The root namespace's end of the node's link."""
    v = name("hd" if node == "head" else node)
    assert len(v) <= 15, f"{v}: a link's name has at most 15 characters"
    return v


_subnet: list[str] = []


def subnet() -> str:
    """This run's 10.231.X (the first three octets), chosen once: X from the tag, or the next one up
    that no address or route of the root namespace and no address in another run's namespaces has.
    (Two runs starting at the same moment may still both take one: harmless, each is on its own bridge.)"""
    if not _subnet:
        used = _used_subnets()
        start = int(hashlib.sha256(TAG.encode()).hexdigest(), 16) % 254
        x = next((x for i in range(254) if (x := 1 + (start + i) % 254) not in used), 1 + start)
        _subnet.append(f"{SUBNETS}.{x}")
    return _subnet[0]


def _used_subnets() -> set[int]:
    texts = [
        _ip("-o", "-4", "addr", "show", check=False).stdout,
        _ip("-4", "route", "show", "table", "all", check=False).stdout,
    ]
    texts += [
        _ip("-n", ns, "-o", "-4", "addr", "show", check=False).stdout
        for ns in _all_namespaces()
        if ns.startswith(PREFIX) and tag_of(ns) != TAG
    ]
    pattern = re.compile(rf"\b{re.escape(SUBNETS)}\.(\d+)\.\d+")
    return {int(m.group(1)) for text in texts for m in pattern.finditer(text)}


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    if not check and shutil.which("ip") is None:
        return subprocess.CompletedProcess(["ip", *args], 1, "", "no ip command")
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def unavailable() -> str | None:
    """Why namespaces cannot be used here (None when they can)."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return f"network namespaces need root (ip netns add), and this runs as uid {os.geteuid()}"
    if shutil.which("ip") is None:
        return "no ip command (iproute2) on this machine"
    probe = name("probe")
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add does not work here: {r.stderr.strip()}"
    try:
        r = _ip("link", "add", name("pb"), "type", "bridge", check=False)
        if r.returncode != 0:
            return f"cannot create a bridge here: {r.stderr.strip()}"
        _ip("link", "del", name("pb"), check=False)
    finally:
        _ip("netns", "del", probe, check=False)
    return None


# ---- what belongs to which run, and removing it -------------------------------------------------


def _all_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _all_links() -> list[str]:
    return [
        line.split(":")[1].strip().split("@")[0]
        for line in _ip("-o", "link", "show", check=False).stdout.splitlines()
        if line.count(":") >= 2
    ]


def our_namespaces(tag: str = TAG) -> list[str]:
    """The namespaces of the run with this tag (this run's by default)."""
    return [ns for ns in _all_namespaces() if tag_of(ns) == tag]


def our_links(tag: str = TAG) -> list[str]:
    """The run's bridge and veth ends in the root namespace."""
    return [link for link in _all_links() if tag_of(link) == tag]


def ns_pids(ns: str) -> list[int]:
    """The processes in a named network namespace (what ``ip netns pids`` lists), from /proc."""
    return namespaces_of_pids().get(ns, [])


def namespaces_of_pids() -> dict[str, list[int]]:
    """Named namespace -> its processes, in one pass over /proc (a process's ns/net is the inode of
    its network namespace; /run/netns/NAME is that of each named one)."""
    named = {}
    for f in Path("/run/netns").glob("*") if Path("/run/netns").is_dir() else []:
        try:
            st = f.stat()
        except OSError:
            continue
        named[(st.st_dev, st.st_ino)] = f.name
    out: dict[str, list[int]] = {}
    if not named:
        return out
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = (d / "ns" / "net").stat()
        except OSError:
            continue
        ns = named.get((st.st_dev, st.st_ino))
        if ns is not None:
            out.setdefault(ns, []).append(int(d.name))
    return out


_ROOT_IN_CMDLINE = re.compile(rb"/tmp/sweep-netns-([0-9a-f]+)/")


def marked_processes() -> dict[str, list[int]]:
    """tag -> the processes a run started, found without its namespaces (which may be deleted under
    them): by the marker in their environment, or the run's directory in their command line."""
    me = os.getpid()
    mark = re.compile(rb"(?:^|\0)" + MARK.encode() + rb"=([0-9a-f]+)/")
    out: dict[str, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            env = (d / "environ").read_bytes()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        tags = {m.group(1).decode() for m in (*mark.finditer(env), *_ROOT_IN_CMDLINE.finditer(cmd))}
        for t in tags:
            out.setdefault(t, []).append(int(d.name))
    return out


def _marked_pids(tag: str = TAG) -> list[int]:
    return marked_processes().get(tag, [])


def root_of(tag: str) -> Path:
    return Path(f"{ROOTS}{tag}")


def _start_time(pid: int) -> str | None:
    """When a process started (clock ticks since boot): tells a pid from its reuse."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def write_owner(root: Path) -> None:
    """Record which process owns the run (its pid and start time), in the run's directory."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "owner").write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}))


def owner_alive(tag: str) -> bool:
    """Whether the process that made the run with this tag still runs (it may own what is there).
    A pid that is alive but was reused (another start time than the run recorded) is not the owner;
    where nothing was recorded, a live pid is taken for the owner, to be safe."""
    if tag == TAG:
        return True
    pid = int(tag[:-2], 16)
    if pid == os.getpid() or not alive(pid):  # this process runs no other tag's cluster
        return False
    try:
        owner = json.loads((root_of(tag) / "owner").read_text())
    except (OSError, ValueError):
        return True
    return owner.get("pid") != pid or owner.get("start") in (None, _start_time(pid))


def kept(tag: str) -> bool:
    """A cluster ``python -m tests.cluster.netns up`` left running on purpose (until ``down``)."""
    return (root_of(tag) / "kept").exists()


def all_tags() -> set[str]:
    """The tags of every run that left something on this machine (namespaces, links, directories,
    processes), live or not."""
    tags = {t for t in map(tag_of, _all_namespaces() + _all_links()) if t}
    tags |= {str(p).removeprefix(ROOTS) for p in Path("/tmp").glob("sweep-netns-*")}
    tags |= set(marked_processes())
    return {t for t in tags if re.fullmatch(r"[0-9a-f]{3,}", t)}


def dead_runs(also_kept: bool = False) -> list[str]:
    """The tags of runs whose owner is gone: a killed run's, and (also_kept) what ``up`` left."""
    return sorted(t for t in all_tags() if not owner_alive(t) and (also_kept or not kept(t)))


def kill_pids(pids: list[int], wait_s: float = 15.0) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_namespace(ns: str, wait_s: float = 15.0) -> int:
    """SIGKILL every process in ``ns`` until none is left (a dying raylet may still start one)."""
    n = 0
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        pids = [p for p in ns_pids(ns) if alive(p)]
        if not pids:
            break
        n += len(pids)
        kill_pids(pids, wait_s=2.0)
    return n


def cleanup(tag: str = TAG, remove_files: bool = True) -> dict:
    """Remove everything of one run (this one by default): the processes in its namespaces (and its
    marked ones outside), the namespaces, its bridge and veth ends, its directory."""
    done = {"namespaces": [], "processes": 0, "links": []}
    for ns in our_namespaces(tag):
        done["processes"] += kill_namespace(ns)
    stray = _marked_pids(tag)
    if stray:
        done["processes"] += len(stray)
        kill_pids(stray)
    for ns in our_namespaces(tag):
        _ip("netns", "del", ns, check=False)
        done["namespaces"].append(ns)
    for _ in range(50):  # veth ends vanish with their namespace, asynchronously
        links = our_links(tag)
        if not links:
            break
        for link in links:
            if _ip("link", "del", link, check=False).returncode == 0:
                done["links"].append(link)
        time.sleep(0.1)
    if remove_files and root_of(tag).exists():
        shutil.rmtree(root_of(tag), ignore_errors=True)
    return done


def cleanup_dead(also_kept: bool = False) -> dict[str, dict]:
    """Remove what runs whose process is gone left (never a live run's): tag -> what was removed."""
    return {t: cleanup(t) for t in dead_runs(also_kept)}


def leftovers(tag: str = TAG) -> list[str]:
    """What of one run (this one by default) is still there (empty when nothing)."""
    left = [f"namespace {ns}" for ns in our_namespaces(tag)]
    left += [f"link {link}" for link in our_links(tag)]
    left += [f"process {p} ({_cmd(p)})" for p in _marked_pids(tag) if alive(p)]
    if root_of(tag).exists():
        left.append(f"directory {root_of(tag)}")
    return left


def _cmd(pid: int, limit: int | None = 120) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:limit]
    except OSError:
        return "?"


# ---- the cluster ----------------------------------------------------------------------------------


@dataclass
class Line:
    t: float  # time.time() when it was read
    text: str


class Output:
    """A process's stdout and stderr, read as they come, each line stamped with when it arrived."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[Line] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._read, args=(s,), daemon=True) for s in (proc.stdout, proc.stderr) if s
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream) -> None:
        for raw in iter(stream.readline, ""):
            with self._lock:
                self.lines.append(Line(time.time(), raw.rstrip("\n")))

    def find(self, needle: str) -> Line | None:
        with self._lock:
            return next((ln for ln in self.lines if needle in ln.text), None)

    def text(self) -> str:
        with self._lock:
            return "\n".join(ln.text for ln in self.lines)

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=5)
        return rc


@dataclass
class NetnsCluster:
    hosts: tuple[str, ...] = HOSTS
    root: Path = ROOT
    timings: dict[str, float] = field(default_factory=dict)
    health_check: dict[str, str] = field(default_factory=lambda: dict(HEALTH_CHECK))
    _observer: subprocess.Popen | None = None

    # -- paths and environments --
    def home(self, node: str) -> Path:
        return self.root / node / "home"

    @property
    def token_file(self) -> Path:
        return self.root / "auth_token"

    @property
    def address(self) -> str:
        return f"{ip_of('head')}:{RAY_PORT}"

    def env(self, node: str, **extra: str) -> dict[str, str]:
        """A clean environment for a process on ``node``: its own HOME and sweep cache (each host of a
        real cluster has its own), temp files under the harness's root, the venv, no RAY_* of the
        caller, and the harness's marker."""
        keep = {
            k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "SHELL")
        }
        env = {
            **keep,
            "HOME": str(self.home(node)),
            "SWEEP_CACHE_DIR": str(self.root / node / "cache"),
            "TMPDIR": str(self.root / "tmp"),
            "RAY_USAGE_STATS_ENABLED": "0",
            MARK: f"{TAG}/{node}",
            "PYTHONUNBUFFERED": "1",
            "SWEEP_VENV": str(VENV),
        }
        if node != "head" or self.token_file.exists():
            env["RAY_AUTH_TOKEN_PATH"] = str(self.token_file)
        env.update(extra)
        return env

    def driver_env(self, **extra: str) -> dict[str, str]:
        """What a user on the head has: the venv on PATH, token auth, the cluster's address."""
        path = f"{VENV / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return self.env("head", PATH=path, RAY_AUTH_MODE="token", RAY_ADDRESS=self.address, **extra)

    # -- running things inside a namespace --
    def popen(self, node: str, argv: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(
            ["ip", "netns", "exec", ns_of(node), *argv],
            env=env or self.env(node),
            cwd=kw.pop("cwd", REPO),
            text=True,
            **kw,
        )

    def run(
        self, node: str, argv: list[str], env: dict[str, str] | None = None, timeout: float = 120, **kw
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ip", "netns", "exec", ns_of(node), *argv],
            env=env or self.env(node),
            cwd=kw.pop("cwd", REPO),
            text=True,
            capture_output=True,
            timeout=timeout,
            **kw,
        )

    def start(self, node: str, argv: list[str], env: dict[str, str] | None = None, **kw) -> Output:
        """Start ``argv`` in ``node``'s namespace, its output followed line by line."""
        return Output(self.popen(node, argv, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw))

    def pids(self, node: str) -> list[int]:
        return [p for p in ns_pids(ns_of(node)) if alive(p)]

    def processes(self, node: str, pids: list[int] | None = None) -> list[tuple[int, str, str]]:
        """(pid, name, command line) of every live process in ``node``'s namespace."""
        out = []
        for p in self.pids(node) if pids is None else pids:
            try:
                name = Path(f"/proc/{p}/comm").read_text().strip()
            except OSError:
                continue
            out.append((p, name, _cmd(p, None)))
        return out

    def servers(self, node: str, pids: list[int] | None = None) -> list[tuple[int, str]]:
        """Fake or real SGLang server processes in ``node``'s namespace."""
        return [
            (p, cmd)
            for p, name, cmd in self.processes(node, pids)
            if "sweep.fake" in cmd or "sglang.launch_server" in cmd or name.startswith("sglang::")
        ]

    # -- bringing it up --
    def network(self) -> None:
        write_owner(self.root)
        (self.root / "tmp").mkdir(exist_ok=True)
        _ip("link", "add", BRIDGE, "type", "bridge")
        # frames between the namespaces are bridged, not routed: keep the host's iptables out of it
        _ip("link", "set", BRIDGE, "type", "bridge", "nf_call_iptables", "0", check=False)
        _ip("link", "set", BRIDGE, "up")
        for node in ("head", *self.hosts):
            ns = ns_of(node)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", veth_of(node), "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth_of(node), "master", BRIDGE, "up")
            _ip("-n", ns, "addr", "add", f"{ip_of(node)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            for d in ("home", "cache", "ray"):
                (self.root / node / d).mkdir(parents=True, exist_ok=True)

    def bootstrap(self, node: str) -> subprocess.CompletedProcess:
        """``cluster/host-bootstrap.sh`` as an operator runs it on that host."""
        temp = str(self.root / node / "ray")
        extra = ["--", f"--temp-dir={temp}", "--num-cpus=1", "--disable-usage-stats"]
        if node == "head":
            argv = ["bash", "cluster/host-bootstrap.sh", "head", *extra, f"--node-ip-address={ip_of('head')}"]
        else:
            argv = ["bash", "cluster/host-bootstrap.sh", "worker", ip_of("head"), *extra]
        env = self.env(node, SWEEP_OBJECT_STORE_BYTES=OBJECT_STORE, **(self.health_check if node == "head" else {}))
        if node != "head":
            # what an operator exports on a host with no default route (or several NICs), so that the
            # servers there find their own address: SGLang's (its ZMQ broadcast between the nodes of
            # one server) and gloo's (torch.distributed on CPU), as Ray gets --node-ip-address
            env.update(SGLANG_HOST_IP=ip_of(node), GLOO_SOCKET_IFNAME="eth0")
        if node != "head":  # a host of its own has a /dev/shm of its own (SGLang tells hosts apart by it)
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f'mount -t tmpfs -o size={SHM_SIZE},mode=1777 {name("shm")} /dev/shm && exec "$@"',
                "sh",
                *argv,
            ]
        r = self.run(node, argv, env=env, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(
                f"host-bootstrap.sh on {node} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            )
        return r

    def up(self) -> None:
        t0 = time.monotonic()
        cleanup_dead()  # what killed runs left; a live run's stays
        cleanup()
        self.network()
        self.bootstrap("head")
        # the head made its token (~/.ray/auth_token of its HOME): hand it to the hosts and drivers
        made = self.home("head") / ".ray" / "auth_token"
        shutil.copyfile(made, self.token_file)
        os.chmod(self.token_file, 0o600)
        self.timings["head_s"] = time.monotonic() - t0
        self.start_observer()
        with_errors: list[BaseException] = []

        def boot(n: str) -> None:
            try:
                self.bootstrap(n)
            except BaseException as e:  # noqa: BLE001 - re-raised below
                with_errors.append(e)

        threads = [threading.Thread(target=boot, args=(n,)) for n in self.hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if with_errors:
            raise with_errors[0]
        self.wait_hosts(set(self.hosts), timeout=120)
        self.timings["up_s"] = time.monotonic() - t0

    def start_observer(self) -> None:
        """A small driver on the head that writes the cluster's node table whenever it changes."""
        out = self.root / "nodes.jsonl"
        with open(self.root / "observer.err", "w") as err:
            self._observer = self.popen(
                "head",
                [sys.executable, str(Path(__file__).with_name("observer.py")), str(out)],
                env=self.driver_env(),
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def nodes(self) -> tuple[float, list[dict]]:
        """The latest node table the observer wrote: (when, [{id, ip, alive, host}])."""
        try:
            lines = (self.root / "nodes.jsonl").read_text().splitlines()
            last = json.loads(lines[-1])
            return last["t"], last["nodes"]
        except (OSError, IndexError, ValueError):
            return 0.0, []

    def node_events(self) -> list[dict]:
        try:
            return [json.loads(x) for x in (self.root / "nodes.jsonl").read_text().splitlines()]
        except (OSError, ValueError):
            return []

    def alive_hosts(self) -> dict[str, str]:
        """ip -> node id of the live GPU hosts."""
        return {n["ip"]: n["id"] for n in self.nodes()[1] if n["alive"] and n["host"]}

    def wait_hosts(self, hosts: set[str], timeout: float) -> float:
        """Wait until exactly these hosts are alive GPU hosts; returns the seconds it took."""
        want = {ip_of(h) for h in hosts}
        t0 = time.monotonic()
        wait_for(
            lambda: set(self.alive_hosts()) == want,
            timeout,
            lambda: (
                f"alive hosts {sorted(self.alive_hosts())}, want {sorted(want)}; "
                f"observer: {(self.root / 'observer.err').read_text()[-2000:] if (self.root / 'observer.err').exists() else ''}"
            ),
        )
        return time.monotonic() - t0

    # -- faults --
    def cut(self, node: str) -> None:
        """The host's cable pulled: its link goes down, packets to and from it are lost (no reset)."""
        _ip("link", "set", veth_of(node), "down")

    def restore(self, node: str) -> None:
        _ip("link", "set", veth_of(node), "up")

    def kill_raylet(self, node: str) -> list[int]:
        pids = [p for p, name, _ in self.processes(node) if name == "raylet"]
        kill_pids(pids)
        return pids

    def kill_host(self, node: str) -> int:
        """Everything on the host at once, as a power loss: every process in its namespace."""
        return kill_namespace(ns_of(node))

    def restart_host(self, node: str) -> None:
        """Bring a host back as an operator would: whatever is left of it gone, then the bootstrap again."""
        self.restore(node)
        kill_namespace(ns_of(node))
        self.bootstrap(node)

    def heal(self, timeout: float = 120) -> list[str]:
        """Every host back in the cluster and nothing of an earlier sweep left running on any host."""
        restarted = []
        alive = self.alive_hosts()
        for h in self.hosts:
            if ip_of(h) not in alive or not any(name == "raylet" for _, name, _ in self.processes(h)):
                self.restart_host(h)
                restarted.append(h)
        self.wait_hosts(set(self.hosts), timeout)
        return restarted

    def down(self) -> dict:
        if self._observer is not None and self._observer.poll() is None:
            self._observer.kill()
        return cleanup()


@dataclass
class Seen:
    """A server process seen in a host's namespace."""

    node: str
    pid: int
    cmdline: str
    env: dict[str, str]
    first: float
    last: float


class Watch:
    """Samples every host's namespace for server processes while a sweep runs (a thread)."""

    def __init__(self, cluster: NetnsCluster, every: float = 0.25):
        self.cluster = cluster
        self.every = every
        self.seen: dict[int, Seen] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Watch:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            by_ns = namespaces_of_pids()
            for node in ("head", *self.cluster.hosts):
                for pid, cmd in self.cluster.servers(node, by_ns.get(ns_of(node), [])):
                    if pid in self.seen:
                        self.seen[pid].last = now
                        continue
                    self.seen[pid] = Seen(node, pid, cmd, _environ(pid), now, now)
            self._stop.wait(self.every)

    def on(self, node: str) -> list[Seen]:
        return [s for s in self.seen.values() if s.node == node]

    def where(self, point_id: str) -> list[str]:
        """The namespaces a point's servers (its launcher processes) ran in."""
        return sorted({s.node for s in self.seen.values() if s.env.get("SWEEP_POINT") == point_id})


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode("utf-8", "replace").split("\0") if "=" in kv)


def wait_for(cond, timeout: float, what=lambda: "", every: float = 0.2):
    """Poll ``cond`` until it is truthy (returned) or ``timeout`` passes (AssertionError naming ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what() if callable(what) else what}")
        time.sleep(every)


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else ""
    if cmd == "up":
        why = unavailable()
        if why:
            print(why, file=sys.stderr)
            return 2
        c = NetnsCluster()
        c.up()
        (c.root / "kept").write_text("left running by python -m tests.cluster.netns up; removed by down\n")
        print(json.dumps({"tag": TAG, "up_s": round(c.timings["up_s"], 1), "hosts": c.alive_hosts()}))
        print(
            f"on the head: ip netns exec {ns_of('head')} env RAY_ADDRESS={c.address} RAY_AUTH_MODE=token "
            f"RAY_AUTH_TOKEN_PATH={c.token_file} HOME={c.home('head')} .venv/bin/python -m sweep hosts"
        )
        return 0
    if cmd == "down":
        removed = cleanup_dead(also_kept=True)
        print(json.dumps(removed))
        left = [x for t in removed for x in leftovers(t)]
        print("left: " + (", ".join(left) or "nothing"))
        live = sorted(all_tags() - set(removed) - {TAG})
        if live:
            print("not touched, their process still runs: " + ", ".join(f"{t} (pid {int(t[:-2], 16)})" for t in live))
        return 1 if left else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
