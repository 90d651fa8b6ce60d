#!/usr/bin/env bash
# Installs the Debian packages kvindex needs to build, test and benchmark, when missing.
# Idempotent; runs apt-get as root, or through sudo otherwise. Usage: scripts/setup.sh
set -euo pipefail

packages=(
  # toolchain
  cmake ninja-build g++ pkg-config clang libclang-rt-14-dev
  # libraries (never vendored, never downloaded at build time)
  libcli11-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libxxhash-dev nlohmann-json3-dev
  libbenchmark-dev doctest-dev libcpp-httplib-dev libsimdjson-dev prometheus-cpp-dev libnats-dev
  libboost-dev
  # the event journal: the NATS JetStream client library, and the server the tests start
  nats-server
  # independent oracles for the tests (Debian's python3, /usr/bin/python3)
  python3 python3-xxhash python3-msgpack python3-zmq
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
