# Source this first in a call on a lent GPU machine (Python 3.12, torch, JAX; no network). It installs the
# carried wheels (.whl, from ../shared/tools/device-wheels) into /tmp/site and caches bytecode, which the image's
# PYTHONDONTWRITEBYTECODE=1 turns off (imports then take 8-13 s instead of about 5). JAX's persistent compilation
# cache lives in .snap/jax_cache, carried from call to call. The example task package goes on the path as
# `make setup` installs it (the tests import it).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
unset PYTHONDONTWRITEBYTECODE
export PYTHONPATH="$PWD/src:$PWD/examples/pendulum_task/src:/tmp/site" PYTHONPYCACHEPREFIX=/tmp/pycache PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR="$PWD/.snap/jax_cache"
mkdir -p "$JAX_COMPILATION_CACHE_DIR"
