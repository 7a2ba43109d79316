#!/usr/bin/env bash
# Debian's Chromium for the MLflow UI test (tests/test_mlflow_ui.py), which Playwright's Python package (the
# `test` extra) drives through `executable_path`; no browser download from Playwright. Idempotent: does nothing
# when chromium is already on PATH. Needs root or sudo, and apt.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
