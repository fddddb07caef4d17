# The paper: jinja2 templates in report/ rendered with our results, compiled by latexmk.
# It needs TeX Live on the machine (README); without latexmk only this job fails, with a hint.
# What it reads is declared with its sections and figures (adbench/sections/paper.py and
# figures.py): each declared input and figure is an input here and an option of
# render_paper.py.
from adbench.sections import paper as declared_sections  # noqa: E402

# The declared inputs other rule files make, by name (the others are the results tree's
# files their declarations name).
SECTION_FILES = {
    "tables": [*TABLE_FILES, MEMORY_FILE],  # memory.csv is read from the tables folder
    "published": sorted(in_tree(p) for p in (ROOT / "report" / "published").glob("*.*")),
    "graphs": [
        GRAPH_NODES,
        GRAPH_VERSION,
        *(GRAPH_FILES[f"{f}_pdf"] for f in graph_figures.GRAPH_FRAMEWORKS),
    ],
    "scaling_table": SCALING_TABLE,
    "peak": PEAK_FILES,
    "scaling_figure": [p for k, p in SCALING_FIGURES.items() if k.endswith("_pdf")],
    # benchmarks/validate_harness.py's findings, when someone ran it for this tree
    "validation": lambda w: [p for p in [tree("validation/harness.json")] if os.path.exists(p)],
    "configfile": [],  # not files: the run's config and results tree (SECTION_VALUES)
    "results": [],
}
SCALING_AXES = {p: k.rsplit("_", 1)[0] for k, p in SCALING_FIGURES.items()}
# The option values an input's files become, where they are not the files themselves.
SECTION_VALUES = {
    "tables": lambda files, output: [os.path.dirname(files[0])],
    "published": lambda files, output: ["report/published"],
    "graphs": lambda files, output: [os.path.dirname(files[0])],
    "scaling_figure": lambda files, output: [f"{SCALING_AXES[p]}={p}" for p in files],
    # the last appendix's commands: this run's config and results tree
    "configfile": lambda files, output: [paper_configfile()],
    "results": lambda files, output: [os.path.dirname(os.path.dirname(output[0]))],
}


rule paper:
    input:
        env_inputs(spec.ANALYSIS_ENV),
        **declared_sections.rule_inputs(
            tree, SECTION_FILES, {n.removesuffix("_pdf"): p for n, p in FIGURE_FILES.items()}
        ),
        template="report/paper.tex.j2",
        code=code("render_paper.py", *declared_sections.context_modules()),
        bib="report/references.bib",
        # the sections' templates and the figures' captions the master template includes
        templates=sorted(
            in_tree(p)
            for folder in ("sections", "figures")
            for p in (ROOT / "report" / folder).glob("*.tex.j2")
        ),
    output:
        reported(tree("paper/paper.pdf"), "paper", "Paper"),
    log:
        tree("logs/paper.log"),
    conda:
        env_file(spec.ANALYSIS_ENV)
    params:
        python=env_python(spec.ANALYSIS_ENV),
        options=lambda w, input, output: declared_sections.command_line(
            input, output, SECTION_VALUES
        ),
    shell:
        "{params.python} {input.code[0]} --template {input.template} --bib {input.bib} "
        "{params.options} --out {output} > {log} 2>&1"
