#!/usr/bin/env bash
# The one install step (README). Installs the driver (snakemake, uv, test tools) into this
# Python, and TeX Live for the paper where it can (Debian/Ubuntu, as root).
#   ./setup.sh          what `snakemake --cores 8` needs; framework envs are built by the
#                       pipeline itself from envs/*.yaml on first run (into .venvs/); and
#                       the analysis pins into this Python, for the configs that analyse
#                       here (environments: current: config/machines-example.yaml, the
#                       example trees' configs) and the plan (plan_campaign.py)
#   ./setup.sh --test   also installs the framework pins into this Python, for the test
#                       suite and for `--config environments=current`, and (as root)
#                       SLURM's packages for the cluster tests
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
say() { printf '[setup] %s\n' "$*" >&2; }
MODE=${1:-}

say "driver: $($PYTHON --version) -> requirements.txt"
$PYTHON -m pip install --quiet -r requirements.txt

# The analysis pins always (an analysis-only config runs its tables, figures and paper in
# this Python); the frameworks' too for the tests.
PINS="envs/analysis.yaml"
[ "$MODE" = "--test" ] && PINS="envs/torch.yaml envs/tensorflow.yaml $PINS"
say "into this Python: the pins of $PINS"
reqs=$(mktemp)
# shellcheck disable=SC2086
$PYTHON workflow/scripts/build_env.py --print-requirements $PINS | sort -u > "$reqs"
links=()
for link in ${PIP_FIND_LINKS:-}; do links+=(--find-links "$link"); done
# uv ignores pip's configuration, hence pip's find-links passed on explicitly.
$PYTHON -m uv pip install --quiet --compile-bytecode --python "$($PYTHON -c 'import sys; print(sys.executable)')" \
  "${links[@]}" -r "$reqs"
rm -f "$reqs"

# apt_install WHAT ALREADY_PRESENT_TEST WITHOUT_IT PACKAGES...: Debian/Ubuntu packages, as
# root; elsewhere say what is missing, what fails without it and how to install it.
apt_install() {
  local what=$1 present=$2 without=$3; shift 3
  if eval "$present"; then
    say "$what: present"
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "$what: installing from Debian/Ubuntu packages (a few minutes)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    say "$what: not installed; $without"
    say "  install: sudo apt-get install --no-install-recommends $*"
  fi
}

# graphviz: its dot draws the computation graphs (rule graphs, the study's Figures 4-5).
TEX_PACKAGES="texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended
  texlive-science lmodern latexmk graphviz"
# The tests read the PDF's text back (pdftotext) to check what reached it.
[ "${1:-}" = "--test" ] && TEX_PACKAGES="$TEX_PACKAGES poppler-utils"
# shellcheck disable=SC2086
apt_install "TeX Live" 'command -v latexmk >/dev/null && kpsewhich siunitx.sty >/dev/null 2>&1 &&
  command -v dot >/dev/null &&
  { [ "$MODE" != --test ] || command -v pdftotext >/dev/null; }' \
  "the paper job will fail with this hint, all else runs." $TEX_PACKAGES
# The cluster tests (tests/test_slurm.py) start a real single-node SLURM on localhost.
if [ "${1:-}" = "--test" ]; then
  # slurmdbd on MariaDB: the accounting database (sacct), as a site has.
  apt_install "SLURM" '[ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmdbd ] &&
    [ -x /usr/sbin/mariadbd ]' "the cluster tests will fail saying so." \
    slurmctld slurmd slurm-client munge slurmdbd mariadb-server
fi
say "done"
