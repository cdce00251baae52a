"""The fake's speed model (sweep/fake/model.py) as the known truth of a dry run: what each point's
output throughput at each level should be, and how a report's pair verdicts compare with it."""

from __future__ import annotations

import polars as pl

from sweep.fake import model
from sweep.fake.main import serving_for
from sweep.results import load


def model_levels(directory) -> pl.DataFrame:
    """point_id, concurrency, model_tok_s: the model's output throughput of each measured level at real
    speed (the point's own argv through SGLang's rules, its NCCL environment, the level's request count,
    max tokens and mean prompt length)."""
    t = load(directory)
    points = t["points"].collect().filter(pl.col("status") == "ok")
    levels = t["levels"].collect().filter(pl.col("concurrency") > 0)
    prompts = (
        t["requests"]
        .filter(pl.col("phase") == "level")
        .group_by("point_id", "concurrency")
        .agg(prompt=pl.col("prompt_tokens").mean())
        .collect()
    )
    rows = []
    for p in points.iter_rows(named=True):
        argv = list(p["argv"])
        start = argv.index("sweep.fake") + 1 if "sweep.fake" in argv else 0
        s = serving_for(argv[start:])
        graph = argv[argv.index("--cuda-graph-max-bs") + 1] if "--cuda-graph-max-bs" in argv else None
        mine = levels.filter(pl.col("point_id") == p["point_id"]).unique("concurrency")
        for lv in mine.iter_rows(named=True):
            c = int(lv["concurrency"])
            prompt = prompts.filter((pl.col("point_id") == p["point_id"]) & (pl.col("concurrency") == c))
            run = model.closed_loop_run(
                int(lv["planned_requests"] or lv["requests"]),
                c,
                int(lv["max_tokens"]),
                s.spec,
                dict(p["env"] or {}),
                s.max_running,
                1.0,
                prompt_tokens=round(prompt["prompt"][0]) if prompt.height else model.DEFAULT_PROMPT_TOKENS,
                cuda_graph_max_bs=int(graph) if graph else None,
            )
            rows.append({"point_id": p["point_id"], "concurrency": c, "model_tok_s": run.throughput_tok_s})
    return pl.DataFrame(rows, schema={"point_id": pl.String, "concurrency": pl.Int64, "model_tok_s": pl.Float64})


# how far apart the model must put two setups before a verdict on the other side contradicts it: the
# fake serves its model in real time, and its own figures sit up to 1.8 % below the model's
# (docs/measured/bench_vs_model.json: single-stream decode 620.8 against 632.0), so a pair the model
# puts within 2 % of each other is one no measurement can be held to
MODEL_APART = 0.02


def against_model(pairs: pl.DataFrame, truth: pl.DataFrame) -> pl.DataFrame:
    """``Findings.pairs`` with ``model_ratio`` (point / other, by the model) and ``contradicts`` (a verdict
    beyond noise on the other side of 1 than the model's ratio, where the model puts them more than
    ``MODEL_APART`` apart)."""
    t = truth.with_columns(pl.col("concurrency").cast(pl.Int64))
    return (
        pairs.with_columns(pl.col("concurrency").cast(pl.Int64))
        .join(t.rename({"model_tok_s": "_a"}), on=["point_id", "concurrency"], how="left")
        .join(t.rename({"point_id": "other_id", "model_tok_s": "_b"}), on=["other_id", "concurrency"], how="left")
        .with_columns(model_ratio=pl.col("_a") / pl.col("_b"))
        .with_columns(
            contradicts=((pl.col("verdict") == "ahead") & (pl.col("model_ratio") < 1 - MODEL_APART))
            | ((pl.col("verdict") == "behind") & (pl.col("model_ratio") > 1 / (1 - MODEL_APART)))
        )
        .drop("_a", "_b")
    )
