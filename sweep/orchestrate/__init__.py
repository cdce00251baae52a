"""The driver: a sweep on a Ray cluster (``sweep``: plan, results directory, resume, the search, one Ray
task per server launch), the cluster itself (``cluster``, ``hosts_cli``), the tasks and their
progress (``ray_runner``, ``progress``), and the phases after the grid (``decide``, ``confirm``,
``baseline_curve`` for refinement). The only room that imports Ray."""

from sweep.orchestrate.sweep import RunOptions, results_path, run_sweep

# confirm, hosts_cli: modules other rooms use as namespaces, imported on first use

__all__ = ["RunOptions", "confirm", "hosts_cli", "results_path", "run_sweep"]
