#!/usr/bin/env bash
# Collect into $1 (default .whl_brax) the wheels the offline H200 machine (Python 3.12) lacks for
# tools/brax_go1_anchor.py, beyond its image (../shared/tools/device-has.txt) and the project's own wheel set (.whl,
# which carries mujoco-core 4.0.0 and mujoco-mjx 3.17.0).
# Found by importing mujoco_playground and brax.training.agents.ppo in a venv holding only the image's packages and
# these: ml-collections, jaxopt (brax.generalized) and trimesh (mujoco.mjx's mesh code) are all the import chain
# needs. Not needed: the `mujoco` meta-package (mujoco-core provides the module), warp-lang (mujoco.mjx imports it
# in a try and runs impl="jax" without it), mediapy, flask, dm-env, dm-tree, tensorboardX.
# About 9.3 MB (playground is 8 MB of it); with .whl (about 47 MB) it stays under the 64 MiB carry limit.
# Usage (from the project root):  bash tools/brax_wheels.sh [FOLDER]
# On the GPU machine, after tools/gpu_env.sh:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl_brax/*.whl
set -euo pipefail
out=${1:-.whl_brax}
mkdir -p "$out"
exclude="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx "/$out/" "$exclude" 2>/dev/null || echo "/$out/" >>"$exclude" # carried, never committed
python3 -m pip download -q --no-deps --only-binary=:all: -d "$out" \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  playground==0.2.0 brax==0.14.2 ml-collections==1.1.0 jaxopt==0.8.5 trimesh==5.2.0
for wheel in mujoco_core-4.0.0-cp312 mujoco_mjx-3.17.0; do
  ls .whl/"$wheel"*.whl >/dev/null 2>&1 || echo "note: .whl has no $wheel wheel; the tool needs it too" >&2
done
echo "$(ls "$out" | wc -l) wheels, $(du -cb "$out"/*.whl | tail -1 | cut -f1) bytes in $out"
