from sweep.orchestrate.sweep import RunOptions, results_path, run_sweep

# confirm, hosts_cli: modules other rooms use as namespaces, imported on first use

__all__ = ["RunOptions", "confirm", "hosts_cli", "results_path", "run_sweep"]
