#!/usr/bin/python3
"""Draws one or several training runs side by side from the examples' --metrics files.

    mnist --amp off  --metrics fp32.jsonl
    mnist --amp fp16 --metrics fp16.jsonl
    tools/plot_runs.py fp32.jsonl fp16.jsonl bf16=run3.jsonl --out runs.png

Four panels: training loss by step; evaluation loss and accuracy (or validation loss) by
step; the loss scale by step on a log axis (runs with loss scaling), with the logging steps
after which skipped steps were counted marked; throughput (samples/s). A run is named by its file name without
extension, or by LABEL=FILE. Needs matplotlib (Debian: python3-matplotlib); nothing else in
the project does.
"""
import argparse
import json
import os
import sys


def read_run(path):
    train, evals = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_runs: {path}:{number}: not a JSON record ({e})")
            if not isinstance(record, dict) or "step" not in record:
                sys.exit(f"plot_runs: {path}:{number}: a record needs a 'step' field")
            (train if record.get("kind") == "train" else evals).append(record)
    if not train and not evals:
        sys.exit(f"plot_runs: {path}: no records")
    return train, evals


def series(records, key):
    points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="metrics files (JSON lines), optionally LABEL=FILE")
    parser.add_argument("--out", default="runs.png", help="image to write (PNG, SVG or PDF by extension)")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args()

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_runs: needs matplotlib (apt-get install python3-matplotlib)")

    runs = []
    for spec in args.runs:
        label, path = spec.split("=", 1) if "=" in spec and not os.path.exists(spec) else (None, spec)
        if not os.path.exists(path):
            sys.exit(f"plot_runs: {path}: no such file")
        label = label or os.path.splitext(os.path.basename(path))[0]
        runs.append((label, *read_run(path)))

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    (ax_loss, ax_eval), (ax_scale, ax_speed) = axes
    ax_acc = None
    for i, (label, train, evals) in enumerate(runs):
        color = f"C{i}"
        ax_loss.plot(*series(train, "loss"), color=color, label=label, linewidth=1)
        for key, style in (("test_loss", "-o"), ("val_loss", "-o")):
            x, y = series(evals, key)
            if x:
                ax_eval.plot(x, y, style, color=color, label=f"{label} {key.replace('_', ' ')}")
        ax_speed.plot(*series(train, "samples_per_s"), color=color, label=label, linewidth=1)
        x, y = series(evals, "test_accuracy")
        if x:
            ax_acc = ax_acc or ax_eval.twinx()
            ax_acc.plot(x, y, "--s", color=color, label=f"{label} test accuracy")
        x, y = series(train, "loss_scale")
        if not any(v != 1 for v in y):
            continue  # no loss scaling in this run (fp32, bf16): nothing to draw
        ax_scale.plot(x, y, color=color, label=label, drawstyle="steps-post")
        # Logging steps after which the skipped-step counter went up.
        skipped = [r for prev, r in zip(train, train[1:]) if r.get("skipped_steps", 0) > prev.get("skipped_steps", 0)]
        if train and train[0].get("skipped_steps", 0) > 0:
            skipped.insert(0, train[0])
        if skipped:
            ax_scale.plot([r["step"] for r in skipped], [r["loss_scale"] for r in skipped], "x", color=color,
                          markersize=8, label=f"{label}: skipped steps ({train[-1]['skipped_steps']})")

    ax_loss.set(title="training loss", xlabel="step", ylabel="loss")
    ax_eval.set(title="evaluation", xlabel="step", ylabel="loss")
    if ax_acc:
        ax_acc.set_ylabel("accuracy (%)")
        lines, labels = ax_eval.get_legend_handles_labels()
        lines2, labels2 = ax_acc.get_legend_handles_labels()
        ax_eval.legend(lines + lines2, labels + labels2, fontsize="small")
    elif ax_eval.lines:
        ax_eval.legend(fontsize="small")
    ax_scale.set(title="loss scale (x: skipped steps)", xlabel="step", ylabel="scale")
    if ax_scale.lines:
        ax_scale.set_yscale("log", base=2)
    else:
        ax_scale.text(0.5, 0.5, "no run used loss scaling", ha="center", va="center", transform=ax_scale.transAxes)
    ax_speed.set(title="throughput", xlabel="step", ylabel="samples/s")
    for ax in (ax_loss, ax_scale, ax_speed):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    ax_eval.grid(alpha=0.3)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"plot_runs: wrote {args.out} ({len(runs)} runs)")


if __name__ == "__main__":
    main()
