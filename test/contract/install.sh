#!/usr/bin/env bash
# Installs Schemathesis (the version pinned in test/contract/requirements.txt) into a virtualenv
# in .cache/schemathesis/venv (ignored by git), for test/contract/schemathesis.e2e.test.ts.
# Needs Python 3.10 or later with venv and pip, and PyPI. Quiet and quick when already installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.cache/schemathesis/venv
requirements=test/contract/requirements.txt
stamp="$venv/.requirements"
python=${PYTHON:-python3}
if [ -x "$venv/bin/schemathesis" ] && cmp -s "$requirements" "$stamp"; then exit 0; fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "schemathesis installed: $("$venv/bin/schemathesis" --version)"
