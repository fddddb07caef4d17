"""Render the paper (report/paper.tex.j2) from the pipeline's outputs and compile it to PDF.

Standalone: stdlib, pandas and jinja2 only, no snakemake object, so it runs (and is tested)
outside the workflow.  Every number the paper prints is put into the rendering context here;
the template only lays it out.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import jinja2
import pandas as pd

LATEX_TOOLS = ("latexmk", "pdflatex", "bibtex")
INSTALL_HINT = (
    "render_paper.py needs latexmk, pdflatex and bibtex (TeX Live). Install them with\n"
    "  apt-get install --no-install-recommends texlive-latex-recommended texlive-latex-extra "
    "texlive-fonts-recommended texlive-science lmodern latexmk\n"
    "on Debian/Ubuntu, or run ./setup.sh (as root). Use --tex-only to render paper.tex alone."
)

# Columns of the side-by-side tables: (framework, mode) as in the study.
EAGER_COLUMNS = (("torch", "eager"), ("tensorflow", "eager"))
COMPILED_COLUMNS = (("torch", "script"), ("tensorflow", "graph"))
FRAMEWORK_LABELS = {"torch": "PyTorch", "tensorflow": "TensorFlow"}
MODE_LABELS = {"eager": "eager", "script": "TorchScript", "graph": "tf.function"}

# Statements of the study's text (not its tables), for the discussion.  Section numbers refer
# to the study (shared/seeds/000_6ecfd0c259f766ce.txt).


def log(message: str) -> None:
    print(f"render_paper: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- formatting
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "±": r"$\pm$", "µ": r"\textmu{}", "μ": r"\textmu{}", "×": r"$\times$", "→": r"$\to$",
    "–": "--", "—": "---", "…": r"\dots{}", "≤": r"$\le$", "≥": r"$\ge$",
}


def latex(value) -> str:
    """Escape a text value for LaTeX; characters pdflatex may not know are folded to ASCII."""
    out = []
    for ch in str(value):
        if ch in _LATEX_SPECIAL:
            out.append(_LATEX_SPECIAL[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:  # an unknown glyph would stop the build: keep its ASCII base letter, or '?'
            out.append(unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
                       or "?")
    return "".join(out)


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def pm(mean, sd) -> str:
    """'686 $\\pm$ 21' in the study's style; the mean alone when one seed gave no sd."""
    if missing(mean):
        return "n/a"
    return f"{mean:.0f}" if missing(sd) else f"{mean:.0f} $\\pm$ {sd:.0f}"


def ratio(value) -> str:
    return "n/a" if missing(value) else f"{value:.2f}"


def sci(value) -> str:
    """A number for siunitx's \\num{}: '1.2e-06'."""
    return "n/a" if missing(value) else f"\\num{{{value:.1e}}}"


def factor(value) -> str:
    """A ratio like the study's '~50x': whole numbers from 10 up, one decimal below."""
    return "n/a" if missing(value) else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def span(values) -> str:
    """'1.3--1.5' over models, a single value when they agree, 'n/a' when there is none."""
    values = sorted(f"{v:.2f}" for v in values if not missing(v))
    if not values:
        return "n/a"
    return values[0] if values[0] == values[-1] else f"{values[0]}--{values[-1]}"


def unit_threads(n) -> str:
    return f"{n} thread" + ("" if str(n) == "1" else "s")


# ----------------------------------------------------------------------------- tables 1-2
class Notes:
    """Footnote marks (a, b, ...) for table cells that are not 'ok', with their notes."""

    def __init__(self):
        self.items: list[dict] = []

    def mark(self, text: str) -> str:
        for item in self.items:
            if item["text"] == text:
                return item["mark"]
        mark = chr(ord("a") + len(self.items) % 26) + "'" * (len(self.items) // 26)
        self.items.append({"mark": mark, "text": text})
        return mark


def our_cell(rows: pd.DataFrame, framework: str, mode: str, where: str, notes: Notes) -> dict:
    """Formatted cells of one (framework, mode) in one block; n/a with a note, never dropped."""
    label = f"{FRAMEWORK_LABELS.get(framework, framework)} {MODE_LABELS.get(mode, mode)}, {where}"
    found = rows[(rows["framework"] == framework) & (rows["mode"] == mode)]
    if found.empty:
        r, status, note = {}, "n/a", "not measured (not in this run's grid)"
    else:
        r = found.iloc[0].to_dict()
        status = r["status"]
        note = "" if missing(r.get("note")) else str(r["note"])
    if status != "ok" and not note:
        note = f"status {status}"
    cell = {
        "mean": pm(r.get("mean_us"), r.get("mean_sd_us")),
        "std": pm(r.get("std_us"), r.get("std_sd_us")),
        "improvement": ratio(r.get("improvement")),
        "study_style": ratio(r.get("improvement_study_style")),
        "status": status,
    }
    if status != "ok":  # the mark goes on the mean, the note under the table
        mark = notes.mark(f"{latex(label)}: {latex(status)} --- {latex(note)}")
        cell["mean"] += f"$^{{\\mathrm{{{mark}}}}}$"
    return cell


def study_cell(published: pd.DataFrame, model: str, framework: str) -> dict:
    """The study's cells; '--' where the study reported nothing."""
    found = published[(published["model"] == model) & (published["framework"] == framework)]
    if found.empty:
        return {"mean": "--", "std": "--", "improvement": "--"}
    r = found.iloc[0].to_dict()
    return {"mean": pm(r["mean_us"], r["mean_sd_us"]), "std": pm(r["std_us"], r["std_sd_us"]),
            "improvement": ratio(r.get("improvement"))}


def blocks_of(ours: pd.DataFrame):
    """(heading, rows) per (device, threads, task); one all-n/a block when nothing ran."""
    if ours.empty:
        return [("nothing measured", ours)]
    several_tasks = ours["task"].nunique() > 1
    return [(f"{device}, {unit_threads(threads)}" + (f", task {task}" if several_tasks else ""),
             rows)
            for (device, threads, task), rows in ours.groupby(["device", "threads", "task"])]


def side_by_side(ours: pd.DataFrame, published: pd.DataFrame, columns) -> dict:
    """Per block and model: a 'this work' row, then the study's published row."""
    notes = Notes()
    models = list(dict.fromkeys(list(published["model"]) + list(ours["model"])))
    blocks = []
    for heading, rows in blocks_of(ours):
        block_rows = []
        for model in models:
            mine = rows[rows["model"] == model]
            pub = published[published["model"] == model]
            label = (mine if not mine.empty else pub)["model_label"].iloc[0]
            block_rows.append({
                "model_label": latex(label),
                "n_parameters": "n/a" if mine.empty else str(int(mine["n_parameters"].iloc[0])),
                "n_parameters_study": (str(int(pub["n_parameters_published"].iloc[0]))
                                       if "n_parameters_published" in pub and not pub.empty
                                       else "--"),
                "ours": [our_cell(mine, fw, mode, f"{label}, {heading}", notes)
                         for fw, mode in columns],
                "study": [study_cell(pub, model, fw) for fw, _ in columns],
            })
        blocks.append({"heading": latex(heading), "rows": block_rows})
    n_seeds = sorted({int(n) for n in ours["n_seeds"].dropna()})
    return {
        "blocks": blocks, "several_blocks": len(blocks) > 1, "notes": notes.items,
        "columns": [{"framework": FRAMEWORK_LABELS.get(f, f), "mode": MODE_LABELS.get(m, m)}
                    for f, m in columns],
        "n_seeds": ", ".join(map(str, n_seeds)) or "n/a",
        "first_block": latex(blocks_of(ours)[0][0]),
    }


def first_block(ours: pd.DataFrame) -> pd.DataFrame:
    """The rows of the first (device, threads, task) block that have numbers."""
    rows = blocks_of(ours)[0][1]
    return rows[rows["status"] != "n/a"]


def headline(ours1: pd.DataFrame, pub1: pd.DataFrame, ours2: pd.DataFrame,
             pub2: pd.DataFrame) -> dict:
    """Ranges over models for the abstract and discussion, ours (first block) and study's."""
    def per_model(df, value, framework):
        return df[df["framework"] == framework].set_index("model")[value]

    def tf_over_torch(df):
        return list(per_model(df, "mean_us", "tensorflow") / per_model(df, "mean_us", "torch"))

    eager = first_block(ours1)
    compiled = first_block(ours2)
    gains = []
    for framework, mode in COMPILED_COLUMNS:
        gains.append({
            "framework": FRAMEWORK_LABELS[framework], "mode": MODE_LABELS[mode],
            "ours": span(per_model(compiled, "improvement", framework)),
            "ours_study_style": span(per_model(compiled, "improvement_study_style", framework)),
            "study": span(per_model(pub2, "improvement", framework)),
        })
    return {
        "tf_over_torch_eager": span(tf_over_torch(eager)),
        "tf_over_torch_eager_study": span(tf_over_torch(pub1)),
        "improvements": gains,
    }


# ----------------------------------------------------------------------------- other inputs
def gradient_summary(gradients: pd.DataFrame, tolerance: float) -> dict:
    passed = gradients["passed"].astype(str).str.lower().isin(["true", "1"])
    errors = gradients.loc[gradients["status"] == "ok", "max_rel_error"].dropna()
    worst = gradients.loc[errors.idxmax()] if len(errors) else None
    failed = gradients[~passed]
    listed = [
        latex(f"{r.framework}/{r.mode} vs {r.reference}, {r.model}, {r.device}, "
              f"{unit_threads(r.threads)}, seed {r.seed}: {r.status}")
        + ("" if missing(r.max_rel_error) else f" ({sci(r.max_rel_error)})")
        for r in failed.head(10).itertuples()
    ]
    return {
        "tolerance": sci(tolerance),
        "n_compared": len(gradients), "n_passed": int(passed.sum()), "n_failed": len(failed),
        "all_passed": bool(len(gradients)) and bool(passed.all()),
        "max_rel_error": sci(errors.max() if len(errors) else math.nan),
        "worst": latex(f"{worst['framework']}/{worst['mode']} vs {worst['reference']}, "
                       f"{worst['model']}")
        if worst is not None else "n/a",
        "references": latex(", ".join(sorted(gradients["reference"].dropna().unique()))),
        "failed": listed, "n_failed_unlisted": max(0, len(failed) - len(listed)),
    }


def first_iteration_summary(first: pd.DataFrame) -> list[dict]:
    """Per framework and mode, over models, devices, threads and seeds."""
    rows = []
    for (framework, mode), g in first.groupby(["framework", "mode"], sort=True):
        r = g["first_over_median"].dropna()
        rows.append({
            "framework": FRAMEWORK_LABELS.get(framework, latex(framework)),
            "mode": latex(MODE_LABELS.get(mode, mode)),
            "compiled": mode != "eager",
            "n_cells": len(g),
            "first_ms": "n/a" if g["first_step_s"].dropna().empty
            else f"{g['first_step_s'].median() * 1e3:.1f}",
            "median_ms": "n/a" if g["median_step_s"].dropna().empty
            else f"{g['median_step_s'].median() * 1e3:.2f}",
            "ratio_median": factor(r.median() if len(r) else math.nan),
            "ratio_max": factor(r.max() if len(r) else math.nan),
        })
    return sorted(rows, key=lambda row: row["compiled"], reverse=True)


def setup_context(env: dict) -> dict:
    workload = env.get("workload", {})
    devices = env.get("devices", [])
    names = [n for n in env.get("device_names", []) if n not in devices]  # e.g. a GPU's name
    commit = env.get("git_commit")
    return {
        "cpu_model": latex(env.get("cpu_model", "n/a")),
        "cpu_count": env.get("cpu_count", "n/a"),
        "hostname": latex(env.get("hostname", "n/a")),
        "platform": latex(env.get("platform", "n/a")),
        "python": latex(env.get("python", "n/a")),
        "versions": [{"name": latex(k), "version": latex(v)}
                     for k, v in sorted(env.get("versions", {}).items())],
        "devices": latex(", ".join(devices) + (f" ({', '.join(names)})" if names else "")
                         or "n/a"),
        "seeds": ", ".join(str(s) for s in env.get("seeds", [])) or "n/a",
        "n_seeds": len(env.get("seeds", [])),
        "threads": ", ".join(str(t) for t in env.get("threads", [])) or "n/a",
        "git": latex((commit[:12] if commit else "unknown")
                     + (" (with uncommitted changes)" if env.get("git_dirty") else "")),
        "n_samples": workload.get("n_samples", "n/a"),
        "batch_size": workload.get("batch_size", "n/a"),
        "warmup": workload.get("warmup", "n/a"),
        "iterations": workload.get("iterations", "n/a"),
        "n_cells": env.get("n_cells", "n/a"), "n_ok": env.get("n_ok", "n/a"),
        "date": latex(str(env.get("ended_at", ""))[:10] or "n/a"),
        "started_at": latex(env.get("started_at", "n/a")),
        "ended_at": latex(env.get("ended_at", "n/a")),
    }


def study_context(published: Path, pub1: pd.DataFrame, pub2: pd.DataFrame) -> dict:
    """The study's own numbers for the text, read from the published CSVs."""
    # Its improvement column is Table 1's backward mean over Table 2's step mean: one example.
    eager, compiled = (p.set_index(["model", "framework"]).loc[("mlp512", "torch")]
                       for p in (pub1, pub2))
    example = {"eager": f"{eager['mean_us']:g}", "compiled": f"{compiled['mean_us']:g}",
               "ratio": f"{eager['mean_us'] / compiled['mean_us']:.3f}",
               "printed": f"{compiled['improvement']:.2f}"}
    resnet = pd.read_csv(published / "table4_resnet50.csv").set_index(["framework", "mode"])
    get = lambda fw, mode: resnet.loc[(fw, mode), "runtime_s"]  # noqa: E731
    # Numbers the study states in its text; "_"-keys are their sources.
    claims = {k: v for k, v in json.loads((published / "claims.json").read_text()).items()
              if not k.startswith("_")}
    return {
        **claims,
        "example": example,
        "gradient_agreement": sci(claims["gradient_agreement"]),
        "resnet_torch_eager_s": f"{get('torch', 'eager'):g}",
        "resnet_torch_script_s": f"{get('torch', 'script'):g}",
        "resnet_tf_graph_s": f"{get('tensorflow', 'graph'):g}",
        "resnet_tf_eager_s": f"{get('tensorflow', 'eager'):g}",
        "resnet_torch_over_tf_graph": f"{get('torch', 'eager') / get('tensorflow', 'graph'):.0f}",
    }


def read_csv(path) -> pd.DataFrame:
    # Only empty cells and 'nan' are missing: a status of "n/a" must stay a string.
    return pd.read_csv(path, keep_default_na=False, na_values=["", "nan", "NaN"])


def build_context(args) -> dict:
    env = json.loads(Path(args.environment).read_text())
    tables, published = Path(args.tables), Path(args.published)
    ours1 = read_csv(tables / "table1_eager.csv")
    ours2 = read_csv(tables / "table2_compiled.csv")
    pub1 = read_csv(published / "table1_eager.csv")
    pub2 = read_csv(published / "table2_compiled.csv")
    first = read_csv(args.first_iterations)
    return {
        "setup": setup_context(env),
        "table1": side_by_side(ours1, pub1, EAGER_COLUMNS),
        "table2": side_by_side(ours2, pub2, COMPILED_COLUMNS),
        "headline": headline(ours1, pub1, ours2, pub2),
        "gradients": gradient_summary(read_csv(args.gradients), env["gradient_tolerance"]),
        "first_iterations": first_iteration_summary(first),
        "first_iteration_max": factor(first.loc[first["mode"] != "eager", "first_over_median"]
                                      .max()),
        "study": study_context(published, pub1, pub2),
        "models": latex(", ".join(dict.fromkeys(pub1["model_label"]))),
        "figure": "first_iterations.pdf",
        "bibliography": Path(args.bib).stem,
    }


# ----------------------------------------------------------------------------- render, compile
def make_environment(template_dir: Path) -> jinja2.Environment:
    # LaTeX-friendly delimiters: \BLOCK{}, \VAR{}, \#{}, and '%%' line statements.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        block_start_string=r"\BLOCK{", block_end_string="}",
        variable_start_string=r"\VAR{", variable_end_string="}",
        comment_start_string=r"\#{", comment_end_string="}",
        line_statement_prefix="%%", line_comment_prefix="%#",
        trim_blocks=True, lstrip_blocks=True, autoescape=False,
        undefined=jinja2.StrictUndefined,  # a missing number fails loudly, never prints blank
    )
    env.filters["latex"] = latex
    return env


def compile_pdf(folder: Path, tex: Path) -> Path:
    command = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
               f"-output-directory={folder}", tex.name]
    log(f"running {' '.join(command)} in {folder}")
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    pdf = folder / (tex.stem + ".pdf")
    if done.returncode != 0 or not pdf.exists():
        log_file = folder / (tex.stem + ".log")
        lines = (log_file.read_text(errors="replace") if log_file.exists()
                 else done.stdout + done.stderr).splitlines()
        # From the first TeX error ('! ...') if there is one, else the end of the log.
        first_error = next((i for i, line in enumerate(lines) if line.startswith("! ")), None)
        tail = lines[-40:] if first_error is None else lines[first_error:first_error + 40]
        print("\n".join(tail), file=sys.stderr)
        raise SystemExit(f"render_paper: latexmk failed (exit {done.returncode}); "
                         f"see {log_file}")
    return pdf


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--template", required=True, help="report/paper.tex.j2")
    p.add_argument("--bib", required=True, help="report/references.bib")
    p.add_argument("--published", required=True, help="folder of the study's tables")
    p.add_argument("--tables", required=True, help="folder with table1_eager.csv, "
                   "table2_compiled.csv")
    p.add_argument("--figure", required=True, help="first_iterations.pdf")
    p.add_argument("--gradients", required=True, help="gradients.csv")
    p.add_argument("--environment", required=True, help="environment.json")
    p.add_argument("--first-iterations", required=True, help="first_iterations.csv")
    p.add_argument("--out", required=True, help="the PDF to write; paper.tex goes beside it")
    p.add_argument("--tex-only", action="store_true", help="render paper.tex, skip latexmk")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if not args.tex_only:  # fail before touching anything when the PDF cannot be built
        absent = [tool for tool in LATEX_TOOLS if shutil.which(tool) is None]
        if absent:
            raise SystemExit(f"render_paper: {', '.join(absent)} not found on PATH.\n"
                             + INSTALL_HINT)
    out = Path(args.out)
    folder = out.parent.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    log("reading inputs")
    context = build_context(args)
    template = Path(args.template)
    tex = folder / "paper.tex"
    tex.write_text(make_environment(template.parent).get_template(template.name)
                   .render(**context))
    log(f"wrote {tex}")
    shutil.copyfile(args.figure, folder / context["figure"])
    shutil.copyfile(args.bib, folder / Path(args.bib).name)
    if args.tex_only:
        return
    pdf = compile_pdf(folder, tex)
    if pdf.resolve() != out.resolve():
        shutil.copyfile(pdf, out)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
