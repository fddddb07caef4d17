"""What a tree sweeps and which peaks it measures, from its cells alone: what the Snakemake
driver plans rules with (scaling.smk, plan_campaign.py), so the spec alone, no pandas.

sweep_axes     the axes a tree's cells vary: threads, depth, width;
thread_counts  the CPU cells' thread counts, at each of which the matmul peak is measured;
measures_gpu_peak  whether the GPU's peak is measured (where CUDA cells run).
"""

from __future__ import annotations

import math

from adbench import spec

# The models an axis that varies the model draws: the study's MLPs of constant parameters
# (depth), the one-hidden-layer MLPs of the width sweep (width).
AXIS_MODELS = {"hidden_layers": spec.MLPS, "hidden_width": spec.MLP_WIDTHS}
# Whose product measures a GPU's peak (measure_peak.py --device cuda, in its environment).
CUDA_PEAK_FRAMEWORK = "torch"


def hidden_layers(model: str) -> float:
    """Depth of an MLP-family model (hidden layers); NaN for any other family."""
    m = spec.MODELS[model]
    return len(m.arch["sizes"]) - 2 if m.family == "mlp" else math.nan


def hidden_width(model: str) -> float:
    """Units of a one-hidden-layer MLP-family model; NaN for any other."""
    m = spec.MODELS[model]
    return m.arch["sizes"][1] if m.family == "mlp" and len(m.arch["sizes"]) == 3 else math.nan


def sweep_axes(cells) -> list[str]:
    """The axes a config's cells (spec.Cell) vary within one tree: threads, and depth (width)
    where more than one of the axis' models (AXIS_MODELS) is measured."""
    axes = []
    if len({c.threads for c in cells}) > 1:
        axes.append("threads")
    models = {c.model for c in cells}
    axes += [axis for axis, axis_models in AXIS_MODELS.items()
             if len(models & set(axis_models)) > 1]
    return axes


def thread_counts(cells) -> list[int]:
    """The CPU cells' thread counts: the peak is measured at each."""
    return sorted({c.threads for c in cells if c.device == "cpu"})


def measures_gpu_peak(cells) -> bool:
    """Whether the GPU's peak is measured (rule matmul_peak_cuda): where CUDA cells run."""
    return any(c.device == "cuda" for c in cells)
