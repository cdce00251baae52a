"""``python observer.py OUT.jsonl``: a small driver on the head that appends the cluster's node
table to OUT.jsonl each time it changes ({"t": unix time, "nodes": [{id, ip, alive, host}]}), polling
every 0.2 s. The netns harness waits on it, and it times when the cluster noticed each fault."""

import json
import os
import sys
import time

import ray


def main() -> None:
    out = sys.argv[1]
    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, configure_logging=False)
    last = None
    while True:
        nodes = sorted(
            (
                {
                    "id": n["NodeID"],
                    "ip": n["NodeManagerAddress"],
                    "alive": bool(n["Alive"]),
                    "host": n.get("Resources", {}).get("gpu_host", 0) >= 1,
                }
                for n in ray.nodes()
            ),
            key=lambda n: n["id"],
        )
        if nodes != last:
            with open(out, "a") as f:
                f.write(json.dumps({"t": time.time(), "nodes": nodes}) + "\n")
            last = nodes
        time.sleep(0.2)


if __name__ == "__main__":
    main()
