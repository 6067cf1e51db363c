#!/usr/bin/env bash
# Set up lazyconv on a fresh machine: .venv/ with the package (editable) and its dev + spark
# extras, and a Java runtime for Spark when none is installed. Idempotent: a second run with an
# unchanged pyproject.toml only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi

stamp=.venv/.lazyconv-setup
# the compiled kernel is rebuilt when its sources or build script change
want=$(cat pyproject.toml setup.py lazyconv/records/_kernel/*.[ch] | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev,spark]"
  echo "$want" > "$stamp"
fi

# Spark runs on the JVM: install Debian's headless JRE 17 when no java is on PATH.
if ! command -v java >/dev/null 2>&1; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq openjdk-17-jre-headless
fi

# The old Java client tests (tests/oldclients) compile their driver: install Debian's headless
# JDK 17 when no javac is on PATH.
if ! command -v javac >/dev/null 2>&1; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq openjdk-17-jdk-headless
fi

# The load-balancer test (tests/gateway/test_balancer.py) runs two gateways behind Debian's
# HAProxy: install it when missing.
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq haproxy
fi
