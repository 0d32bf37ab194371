# Shared by the packaging checks (deploy/kubernetes/check.sh, deploy/systemd/check.sh, deploy/container/build.sh,
# deploy/container/smoke.sh): each sources it first, as `source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"`, and
# runs alone as `bash deploy/.../SCRIPT` (scripts/test) or directly.
#
# Sets ROOT (the repository) and VENV (target/deploy-venv, where scripts/test installs deploy/requirements.txt);
# `fail MESSAGE` ends the script, naming it; a script that has more to say on failure (a log) defines `on_fail`,
# which runs after the message. `need TOOL [HINT]` fails unless TOOL is on PATH; `tool NAME` prints the path of
# NAME in VENV, else on PATH, else fails.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/target/deploy-venv"

fail() {
    printf '%s: FAILED: %s\n' "$(basename "$0")" "$*" >&2
    if declare -F on_fail >/dev/null; then
        on_fail
    fi
    exit 1
}

need() {
    command -v "$1" >/dev/null 2>&1 || fail "'$1' is not installed${2:+ ($2)}"
}

tool() {
    if [[ -x "$VENV/bin/$1" ]]; then
        printf '%s\n' "$VENV/bin/$1"
    elif command -v "$1" >/dev/null 2>&1; then
        command -v "$1"
    else
        fail "'$1' is not installed (pip install -r deploy/requirements.txt into $VENV)"
    fi
}
