#!/usr/bin/env python
"""Build an isolated virtual environment from the pins of envs/<name>.yaml.

The conda file is the one source of the pins: `--sdm conda` reads it directly; on machines
without conda this script installs its pip section into `.venvs/<name>/` (with uv when it is
available, else pip) and writes a JSON receipt that Snakemake tracks as the job's output.

    python workflow/scripts/build_env.py envs/torch.yaml --prefix .venvs/torch \
        --receipt .venvs/torch.json
    python workflow/scripts/build_env.py envs/torch.yaml --print-requirements
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

import yaml


def read_pins(env_file: str) -> tuple[str | None, list[str]]:
    """The python version and the pip requirements of a conda environment file (its lines
    as written: an option line, `--extra-index-url URL`, among them)."""
    with open(env_file) as f:
        env = yaml.safe_load(f)
    python, pip = None, []
    for dep in env.get("dependencies", []):
        if isinstance(dep, str) and dep.split("=")[0].strip() == "python":
            python = dep.split("=", 1)[1].lstrip("=")
        elif isinstance(dep, dict) and "pip" in dep:
            pip.extend(dep["pip"])
    if not pip:
        raise SystemExit(f"{env_file}: no pip section; nothing to install in a virtual env")
    return python, pip


def log(message: str) -> None:
    print(f"[build_env] {message}", file=sys.stderr, flush=True)


class BuildFailed(Exception):
    """The installer refused the pins; the message ends with what it said."""


def run(cmd: list[str]) -> str:
    log("$ " + " ".join(cmd))
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        said = " ".join(result.stderr.split()[-80:])  # the installer's last words
        raise BuildFailed(f"{os.path.basename(cmd[0])} exited {result.returncode}: {said}")
    return result.stdout


def installer_args(requirements: list[str]) -> tuple[list[str], list[str]]:
    """A pip section's option lines as installer arguments (`--extra-index-url URL`: a CUDA
    build's own wheel index, envs/torch-cu126.yaml), and its requirements."""
    options, pins = [], []
    for line in requirements:
        if line.startswith("-"):
            options.extend(line.split())
        else:
            pins.append(line)
    return options, pins


def uv_index_strategy(options: list[str]) -> list[str]:
    """uv takes a package only from the first index that has it, and an extra index (a
    framework's own) also carries numpy, not at every version: with one, each exact pin is
    taken from whichever index has it at that version."""
    extra = any(o in ("--extra-index-url", "--index-url") for o in options)
    return ["--index-strategy", "unsafe-best-match"] if extra else []


def find_links() -> list[str]:
    # uv ignores pip's configuration: pass pip's find-links (local wheels) on explicitly.
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    return [arg for link in links for arg in ("--find-links", link)]


def build_constraints_file(env_file: str) -> str | None:
    """envs/<name>.build-constraints.txt: pins for building sdists (setuptools < 81 for
    chainer's setup.py); a conda file has no place for them."""
    path = env_file.removesuffix(".yaml") + ".build-constraints.txt"
    return path if os.path.exists(path) else None


def build(env_file: str, prefix: str) -> dict:
    wanted_python, requirements = read_pins(env_file)
    options, pins = installer_args(requirements)
    build_constraints = build_constraints_file(env_file)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if wanted_python and not here.startswith(wanted_python):
        log(f"warning: {env_file} pins python {wanted_python}, building with {here}")
    if os.path.exists(prefix):
        shutil.rmtree(prefix)  # a half-built env from an interrupted run is never reused
    python = os.path.join(prefix, "bin", "python")
    uv = shutil.which("uv")
    if uv:
        run([uv, "venv", "--quiet", "--python", sys.executable, prefix])
        # Byte-code compiled at install: with PYTHONDONTWRITEBYTECODE set (as on CI machines)
        # every timing job would otherwise recompile torch's or TensorFlow's sources on import.
        constrain = ["--build-constraint", build_constraints] if build_constraints else []
        run([uv, "pip", "install", "--compile-bytecode", "--python", python, *find_links(),
             *constrain, *options, *uv_index_strategy(options), *pins])
        freeze = run([uv, "pip", "freeze", "--python", python])
    else:
        run([sys.executable, "-m", "venv", prefix])
        if build_constraints:  # pip applies PIP_CONSTRAINT in its isolated build envs too
            os.environ["PIP_CONSTRAINT"] = os.path.abspath(build_constraints)
        run([python, "-m", "pip", "install", "--quiet", "--compile", *options, *pins])
        freeze = run([python, "-m", "pip", "freeze"])
    return {
        "status": "ok",
        "env_file": env_file,
        "prefix": prefix,
        "python": python,
        "requirements": requirements,
        "build_constraints": build_constraints,
        "installed": freeze.split(),
        "built_with": "uv" if uv else "pip",
        "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("env_file", nargs="+", help="envs/<name>.yaml")
    p.add_argument("--prefix", help="directory of the virtual environment to (re)build")
    p.add_argument("--receipt", help="JSON file written once the environment is complete")
    p.add_argument("--record-failure", action="store_true",
                   help="if the pins cannot be installed, write a receipt with status failed "
                   "and the installer's message and exit 0: the pipeline records that "
                   "environment's cells as failed, the rest of the run goes on")
    p.add_argument("--print-requirements", action="store_true",
                   help="print the pip requirements of the files (for a plain pip install)")
    args = p.parse_args(argv)
    if args.print_requirements:
        print("\n".join(r for f in args.env_file for r in read_pins(f)[1]))
        return 0
    if len(args.env_file) != 1 or not (args.prefix and args.receipt):
        p.error("building takes one env file, --prefix and --receipt")
    try:
        receipt = build(args.env_file[0], args.prefix)
    except BuildFailed as exc:
        if not args.record_failure:
            raise SystemExit(f"{args.env_file[0]}: {exc}") from None
        receipt = {"status": "failed", "env_file": args.env_file[0], "message": str(exc),
                   "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
                       timespec="seconds")}
    tmp = args.receipt + ".tmp"
    with open(tmp, "w") as f:
        json.dump(receipt, f, indent=2)
    os.replace(tmp, args.receipt)
    if receipt["status"] == "ok":
        log(f"{args.prefix} ready ({len(receipt['installed'])} packages)")
    else:
        log(f"{args.env_file[0]} could not be installed; its cells will be recorded as "
            f"failed with this message: {receipt['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
