"""What every figure shares: the data the figures script read (FigureData), its points with
their intervals, its one legend, its title and its layout.

Every figure is drawn at the size the paper prints it (adbench.plotting: the text's width, no
text below 7 pt, at most six panels) and saved uncropped.  Every estimate carries its interval
from the conditions product, filled where it resamples processes, open where it resamples the
iterations of one process; one legend below the panels names every series (a colour per
framework and mode, the same in all of a run's figures) and every marker; the title, above
the panels and clear of them, says the device, threads and processes.  Times on log axes are
points, never bars (a bar's length on a log axis depends on where the axis starts).
"""

from __future__ import annotations

import dataclasses
import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from adbench import formatting as fmt  # noqa: E402
from adbench import comparisons, plotting, spec, stats, tables  # noqa: E402
from adbench.machines_section import machine_names  # noqa: E402
from adbench.plotting import MAX_PANELS, SMALL_PT, TEXT_WIDTH_IN, legend_rows  # noqa: E402
from adbench.report_spec import model_label, task_label  # noqa: E402
from adbench.spec import MODELS, TASKS  # noqa: E402

plt.rcParams.update(plotting.RC)  # every size as printed: the paper includes a figure at its own
MS = fmt.unit_scale("ms")  # the figures draw milliseconds
NO_INTERVALS: dict = {}  # no conditions product: points without intervals
# The marker of an estimate by what its interval resamples (comparisons.basis): filled over
# processes, open over the iterations of one process (no conclusion drawn from it).
ONE_PROCESS = comparisons.ITERATIONS
BASIS_KEYS = {comparisons.PROCESSES: "interval over processes",
              ONE_PROCESS: "interval over one process's iterations"}
STUDY = "study (published)"


@dataclasses.dataclass
class FigureData:
    """What the figures script read, once, for every figure (None: not given)."""

    iterations: pd.DataFrame
    first: int = 30  # the first iterations drawn
    summary: pd.DataFrame | None = None
    cells: pd.DataFrame | None = None
    found: dict = dataclasses.field(default_factory=dict)  # comparisons.estimates: intervals
    confidence: float = 0.95
    published: str | None = None  # report/published: the study's numbers


def interval_ms(found: dict, r, confidence: float) -> tuple[float, float, float, str]:
    """A summary row's mean (of its quantity, the step unless it says) in ms, its interval
    from the conditions product (comparisons.estimates) and the interval's basis; NaN and no
    basis where it has none."""
    key = (*(r[k] for k in stats.CONDITION_FIELDS), r["quantity"] if "quantity" in r else "step_s")
    if key not in found:
        return r["mean_s"] * MS, float("nan"), float("nan"), ""
    point, low, high, basis = found[key]
    return point * MS, low * MS, high * MS, basis


def draw_point(ax, at: float, value: float, low: float, high: float, basis: str, colour, label,
               across=False):
    """A point with its interval as error bars, filled over processes and open over one
    process's iterations (no interval: the point alone)."""
    error = None if pd.isna(low) else [[value - low], [high - value]]
    kwargs = {"xerr": error} if across else {"yerr": error}
    x, y = (value, at) if across else (at, value)
    ax.errorbar(x, y, fmt="o", ms=4, capsize=2, color=colour, label=label,
                mfc="white" if basis == ONE_PROCESS else colour, **kwargs)
    ax._adbench_bases = getattr(ax, "_adbench_bases", set()) | {basis or "none"}


def basis_keys(axes) -> list:
    """The legend's keys of the markers' fill: one per basis drawn (neutral, black)."""
    drawn = set().union(*(getattr(ax, "_adbench_bases", set()) for ax in axes))
    return [(words, Line2D([], [], marker="o", ms=4, color="k", ls="none",
                           mfc="white" if basis == ONE_PROCESS else "k"))
            for basis, words in BASIS_KEYS.items() if basis in drawn]


def finish(fig) -> None:
    """Every figure's last touch: plain log-axis labels, and the panels laid out above the
    figure's legend, inside the figure's own size (it is printed at that size)."""
    tidy_log_ticks(fig)
    fig.tight_layout(rect=(0, legend_rows(fig), 1, under_title(fig)), pad=0.3)


def under_title(fig) -> float:
    """The share of the figure's height below its title: tight_layout leaves the figure's
    title out, and a title of two lines would otherwise run into the top row of panels."""
    if fig._suptitle is None or not fig._suptitle.get_text():
        return 1.0
    box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    gap_in = 0.05
    return (box.y0 / fig.dpi - gap_in) / fig.get_figheight()


def tidy_log_ticks(fig) -> None:
    """Log axes labelled at 1, 2, 3 and 5 times each power of ten as plain numbers (1, 2 and 5
    over a decade or more, the powers alone over three or more), minor ticks unlabelled:
    matplotlib labels the minor ticks of a short span (2, 3, 4, 6 x 10^k), and those run into
    each other.  A span under half a decade gets three plain numbers."""
    for ax in fig.axes:
        for axis, scale, limits in (
            (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
            (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
        ):
            low, high = sorted(limits)
            if scale != "log" or low <= 0:
                continue
            decades = math.log10(high / low)
            if decades < 0.5:  # a short span: a few plain numbers, no power-of-ten labels
                axis.set_major_locator(MaxNLocator(nbins=3))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))
                axis.set_minor_formatter(NullFormatter())
                continue
            subs = (1, 2, 3, 5) if decades < 1 else (1, 2, 5) if decades < 3 else (1,)
            axis.set_major_locator(LogLocator(subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())


def figure_legend(fig, axes, extra=(), columns: int = 4) -> None:
    """One legend for the figure, below its panels: every series drawn in any panel, once,
    then the keys of its markers (`extra`, and the fill of the estimates drawn)."""
    axes = list(axes)
    found = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label != STUDY:  # its key is neutral (study_key), after the modes
                found.setdefault(label, handle)
    for label, handle in [*extra, *basis_keys(axes)]:
        found.setdefault(label, handle)
    if found:
        fig.legend(
            list(found.values()),
            list(found),
            loc="lower center",
            ncol=legend_columns(fig, list(found), columns),
            fontsize=SMALL_PT,
            bbox_to_anchor=(0.5, 0),
            frameon=False,
        )


def legend_columns(fig, labels: list[str], most: int) -> int:
    """As many columns (up to `most`) as the widest entry leaves room for in the figure's
    width: a legend wider than its figure would be cut off at the page's edge."""
    entry_pt = max(len(label) for label in labels) * 0.55 * SMALL_PT + 30
    fits = int(fig.get_figwidth() * 72 // entry_pt)
    return max(1, min(most, fits, len(labels)))


def block_text(block: dict) -> str:
    """The block a figure draws: 'cpu, 1 thread', with its machine (named as people say it:
    its GPU, or its CPU) where known."""
    machine = block.get("machine")
    return fmt.block(block["device"], block["threads"],
                     machine_names([machine])[machine] if machine else None)


def processes_text(cells: pd.DataFrame | None) -> str:
    """'1 process per condition', '1-2 processes per condition': the seeds behind the
    figure's conditions."""
    if cells is None or cells.empty:
        return ""
    ok = cells[cells["status"] == "ok"] if "status" in cells else cells
    counts = ok.groupby(list(stats.CONDITION_FIELDS), observed=True)["seed"].nunique()
    if counts.empty:
        return ""
    low, high = int(counts.min()), int(counts.max())
    span = str(low) if low == high else f"{low}-{high}"
    return f", {span} process{'' if span == '1' else 'es'} per condition"


def task_tick(task: str) -> str:
    """A task's label wrapped to fit beside its neighbours under a narrow panel."""
    return textwrap.fill(task_label(task), 10)


def title(fig, text: str) -> None:
    """The figure's title, wrapped to its width at the title's size."""
    chars = int(0.9 * fig.get_figwidth() * 72 / (0.5 * plotting.FONT_PT))
    fig.suptitle(textwrap.fill(text, chars), fontsize=plotting.FONT_PT)


def mode_colours(cells: pd.DataFrame | None) -> dict:
    """A colour per (framework, mode) the run measured, in spec order, the same in every
    figure of the run (tab10's up to ten modes, tab20's beyond)."""
    present = set(zip(cells["framework"], cells["mode"])) if cells is not None and len(cells) \
        else set(spec.pairs())
    pairs = [p for p in spec.pairs() if p in present]
    palette = plt.get_cmap("tab10" if len(pairs) <= 10 else "tab20").colors
    return {pair: palette[i % len(palette)] for i, pair in enumerate(pairs)}


def pairs_present(data: pd.DataFrame) -> list[tuple[str, str]]:
    """(framework, mode) pairs present, in spec order."""
    present = set(zip(data["framework"], data["mode"]))
    return [pair for pair in spec.pairs() if pair in present]


def lines_of(cell: pd.DataFrame) -> list[tuple[str, str]]:
    """(model, task) pairs of a panel, in spec order."""
    present = set(zip(cell["model"], cell["task"]))
    ordered = [(m, t) for m in MODELS for t in TASKS if (m, t) in present]
    return ordered + sorted(present - set(ordered))


def line_label(model: str, task: str, several_tasks: bool) -> str:
    label = model_label(model) if model in MODELS else model
    return f"{label}, {task_label(task)}" if several_tasks and task in TASKS else label


def notice(text: str):
    """A figure that says why it has nothing to draw (the paper still builds)."""
    fig, ax = plt.subplots(figsize=(4.5, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, textwrap.fill(text, 60), ha="center", va="center")
    return fig


def grid(n_panels: int, columns: int, panel_in: float, extra_in: float, **share):
    """Panels at the text's width, `columns` to a row, each `panel_in` high, plus `extra_in`
    (the title and the legend); the unused ones hidden.  Never over MAX_PANELS."""
    assert n_panels <= MAX_PANELS, f"{n_panels} panels: a figure has at most {MAX_PANELS}"
    columns = max(1, min(columns, n_panels))
    n_rows = -(-n_panels // columns)
    height = min(plotting.MAX_FIGURE_HEIGHT_IN, panel_in * n_rows + extra_in)
    fig, axes = plt.subplots(n_rows, columns, figsize=(TEXT_WIDTH_IN, height), squeeze=False,
                             **share)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def study_key(axes) -> list:
    """The legend's key of the study's markers, drawn in each mode's colour: a neutral one."""
    if not any(STUDY in ax.get_legend_handles_labels()[1] for ax in axes):
        return []
    return [(STUDY, Line2D([], [], marker="D", mfc="none", color="k", ls="none"))]


def published_ms(table, published: pd.DataFrame) -> pd.DataFrame:
    """The study's rows of a table with their mean in ms (they are in the table's unit)."""
    if published.empty:
        return published.assign(mean_ms=pd.Series(dtype=float))
    scale = MS / fmt.unit_scale(table.unit)
    return published.assign(mean_ms=pd.to_numeric(published["mean"], errors="coerce") * scale)


def table_rows(data: pd.DataFrame, table) -> pd.DataFrame:
    """A frame's rows of a table's models and tasks."""
    return data[data["model"].isin(table.models) & data["task"].isin(table.tasks)]


def na_text(ax, x: float) -> None:
    """'n/a' at a slot of a panel whose condition is in the grid but did not complete."""
    ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=SMALL_PT,
            transform=ax.get_xaxis_transform())


def save(fig, paths: list[str]) -> None:
    """At the figure's own size (no cropping): the paper prints it at that size."""
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=150)
    plt.close(fig)


def read_published(folder: str | None, figure: str = "mlp_backward") -> dict:
    """The study's published rows of the tables a figure draws, by table name."""
    found = {}
    for table in tables.tables_drawn_in(figure):
        path = os.path.join(folder, table.published) if folder and table.published else None
        if path and os.path.exists(path):
            found[table.name] = pd.read_csv(path, dtype={"mean": float}, keep_default_na=False)
    return found
