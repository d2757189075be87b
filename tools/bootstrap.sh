# Shared by tools/run-tests and tools/run-demo: a private virtualenv holding
# tox (with tox-uv, so test environments install in seconds).
BOOT_DIR=${SWFLOWS_BOOT_DIR:-$PWD/.tox-bootstrap}
TOX=$BOOT_DIR/bin/tox

bootstrap_tox() {
    if [ ! -x "$TOX" ]; then
        python3 -m venv "$BOOT_DIR"
        "$BOOT_DIR/bin/pip" install -q 'tox>=4.20,<5' 'tox-uv>=1.11,<2' 'uv>=0.4'
    fi
}
