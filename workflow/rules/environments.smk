# Isolated virtual environments built from the pins of envs/<env>.yaml (environments: venv).
# They live in .venvs/, outside results/, so deleting results/ keeps them.


rule build_venv:
    # Runs in the driver's Python (it makes the other environments), hence no conda env.
    input:
        pins=in_tree(ROOT / "envs" / "{env}.yaml"),
        # Optional pins for building sdists (build_env.py); rebuilds when edited.
        build_constraints=lambda w: [
            in_tree(p) for p in [ROOT / "envs" / f"{w.env}.build-constraints.txt"] if p.exists()
        ],
    output:
        ".venvs/{env}.json",
    log:
        ".venvs/logs/{env}.log",
    # Installing is heavy: it never runs beside a timing job (see profiles/default).
    resources:
        timing_lock=1,
    params:
        prefix=".venvs/{env}",
        script=in_tree(SCRIPTS / "build_env.py"),
        # A framework's pins that cannot be installed fail its cells (recorded, with the
        # installer's message), not the run; the analysis environment is needed by all.
        on_failure=lambda w: "" if w.env == spec.ANALYSIS_ENV else "--record-failure",
    run:
        shell(
            "{sys.executable} {params.script} {input.pins} --prefix {params.prefix} "
            "--receipt {output} {params.on_failure} > {log} 2>&1"
        )
