"""The experiment side, before anything launches: the experiment file loaded and checked
(``config``), its grid expanded (``grid``), every point checked against SGLang's rules into a plan
(``plan``), the plan's time estimated (``estimate``) and shown (``render``), and the dry run's scale
(``dryrun``)."""

from sweep.experiment.config import CpuConfig, Experiment, ReapConfig, Timeouts
from sweep.experiment.dryrun import bench_scaler, fake_args, fake_launcher, run_context, scaled
from sweep.experiment.estimate import fmt_s, plan_lines, point_estimates
from sweep.experiment.plan import ConfirmPlan, Plan, PlannedPoint, confirm_probes, confirmation_points, launches_of
from sweep.experiment.render import print_plan

# config, estimate, plan: modules other rooms use as namespaces, imported on first use

__all__ = [
    "ConfirmPlan",
    "CpuConfig",
    "Experiment",
    "Plan",
    "PlannedPoint",
    "ReapConfig",
    "Timeouts",
    "bench_scaler",
    "config",
    "confirm_probes",
    "confirmation_points",
    "estimate",
    "fake_args",
    "fake_launcher",
    "fmt_s",
    "launches_of",
    "plan",
    "plan_lines",
    "point_estimates",
    "print_plan",
    "run_context",
    "scaled",
]
