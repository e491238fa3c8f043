#!/usr/bin/env bash
# Creates .venv (the Python the tests use) and installs scripts/requirements-test.txt into it.
# Idempotent and quiet when nothing changed: a stamp holds the requirements file's hash, so a
# changed pin reinstalls. `make test` runs it; tests find .venv/bin/python (or $PUSHCAST_PYTHON).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${PUSHCAST_VENV:-.venv}
requirements=scripts/requirements-test.txt
python=${PYTHON:-python3}
stamp=$venv/.requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "venv: creating $venv with $($python --version 2>&1)" >&2
    if ! "$python" -m venv "$venv"; then
        # Debian's own python3 needs python3-venv for this (scripts/deps.sh installs it).
        rm -rf "$venv"
        echo "venv: '$python -m venv' failed; on Debian: apt-get install python3-venv" >&2
        exit 1
    fi
fi
echo "venv: installing $requirements" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" >"$stamp"
