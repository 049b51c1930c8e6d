#!/usr/bin/env bash
# Installs what flashcl needs to build, test and benchmark on Debian/Ubuntu: a C compiler,
# CMake, the OpenCL headers and ICD loader, PoCL (OpenCL on the CPU), CLBlast and cmocka.
# Uses sudo when not run as root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
  build-essential cmake pkg-config git ca-certificates \
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
  libclblast-dev libcmocka-dev "$@"
