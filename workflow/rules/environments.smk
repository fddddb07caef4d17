# Isolated virtual environments built from the pins of envs/<env>.yaml (environments: venv).
# They live in .venvs/, outside results/, so deleting results/ keeps them.


rule build_venv:
    input:
        str(ROOT / "envs" / "{env}.yaml"),
    output:
        ".venvs/{env}.json",
    log:
        ".venvs/logs/{env}.log",
    params:
        prefix=".venvs/{env}",
        script=SCRIPTS / "build_env.py",
    # Installing is heavy: it never runs beside a timing job (see profiles/default).
    resources:
        timing_lock=1,
    shell:
        "{sys.executable} {params.script} {input} --prefix {params.prefix} "
        "--receipt {output} > {log} 2>&1"
