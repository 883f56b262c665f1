# Sourced by the install scripts: `test_venv_install PACKAGE VERSION HINT` makes the test
# virtualenv `.venv-test/` at the repository root when missing (HINT: how to do without it),
# installs PACKAGE==VERSION into it unless that version is there, and sets `py` to its python.
test_venv_install() {
    local package="$1" version="$2" hint="$3"
    local venv="$PWD/.venv-test"
    if [ ! -x "$venv/bin/python" ]; then
        if ! "${PYTHON:-python3}" -m venv "$venv" >/dev/null; then
            rm -rf "$venv"
            echo "could not create the virtualenv $venv with ${PYTHON:-python3} -m venv." >&2
            echo "On Debian/Ubuntu install the venv module first: sudo apt-get install python3-venv" >&2
            echo "($hint)" >&2
            exit 1
        fi
    fi
    py="$venv/bin/python"
    local installed
    installed="$("$py" -m pip show "$package" 2>/dev/null | sed -n 's/^Version: //p' || true)"
    if [ "$installed" != "$version" ]; then
        "$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir "$package==$version" >&2
    fi
}
