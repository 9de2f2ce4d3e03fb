"""Physics alone, MJX against MuJoCo Warp, on one robot model and one GPU: control steps per second.

A standalone measurement tool (nothing in rlscale imports it); it needs both extras, ``rlscale[warp,mjx]``. Each
engine steps ``--worlds`` copies of a robot's MJCF (rlscale's own ``go1.xml`` or ``g1.xml``, or any ``--model``)
from the model's ``home`` keyframe, with the keyframe's controls plus normal noise of ``--ctrl_noise`` per world. One
control step is ``--substeps`` physics steps, with the task's time step and solver iterations, as the tasks step them:

- MJX: ``jit(vmap(fori_loop(mjx.step)))``, as the MJX backend does;
- MuJoCo Warp: the substeps captured once as a CUDA graph (``wp.ScopedCapture``) and replayed, with overflow
  warnings off (one printf per world and step otherwise), as the MuJoCo Warp backend does.

Warm-up steps (compilation included) come first. Then ``--repeats`` timed blocks of ``--steps`` control steps per
engine, the engines interleaved so that a drift of the GPU's clock hits both. It prints one JSON document: the
device, versions, each block's rate, the medians, and each engine's mean base height at the end (the engines start
from the same state, so a large difference is a physics difference).

    python tools/engines/physics_speed.py --robot g1 --worlds 16384
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from importlib import resources

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import warp as wp  # noqa: E402
from mujoco import mjx  # noqa: E402

wp.config.log_level = wp.LOG_WARNING  # before Warp initialises (importing MuJoCo Warp does): stdout is the JSON only
import mujoco_warp as mjw  # noqa: E402

from rlscale.tasks.locomotion.cfg import G1FlatCfg, Go1FlatCfg  # noqa: E402
from rlscale.tasks.mjwarp.capacity import model_capacity  # noqa: E402

TASK_CFGS = {"go1": Go1FlatCfg, "g1": G1FlatCfg}
"""Each robot's task config, whose physics step and solver settings the robot's model is stepped with."""


def load_model(args: argparse.Namespace) -> mujoco.MjModel:
    if args.model:
        return mujoco.MjModel.from_xml_path(args.model)
    text = resources.files("rlscale.tasks.locomotion").joinpath("assets", f"{args.robot}.xml").read_text()
    return mujoco.MjModel.from_xml_string(text)


def start_state(model: mujoco.MjModel, args: argparse.Namespace) -> tuple[mujoco.MjData, np.ndarray]:
    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    rng = np.random.default_rng(args.seed)
    ctrl = data.ctrl[None] + args.ctrl_noise * rng.standard_normal((args.worlds, model.nu))
    return data, ctrl.astype(np.float32)


def mjx_engine(model: mujoco.MjModel, data: mujoco.MjData, ctrl: np.ndarray, substeps: int):
    """A function that runs one control step of every world, and the state it steps."""
    mx = mjx.put_model(model)
    batch = jax.vmap(lambda c: mjx.put_data(model, data).replace(ctrl=c))(jnp.asarray(ctrl))

    @jax.jit
    def control_step(state):
        return jax.lax.fori_loop(0, substeps, lambda _, d: jax.vmap(mjx.step, in_axes=(None, 0))(mx, d), state)

    holder = {"state": batch}

    def run() -> None:
        holder["state"] = control_step(holder["state"])

    def sync() -> None:
        holder["state"].qpos.block_until_ready()

    return run, sync, lambda: float(np.asarray(holder["state"].qpos[:, 2]).mean())


def warp_engine(model: mujoco.MjModel, data: mujoco.MjData, ctrl: np.ndarray, substeps: int):
    capacity = model_capacity(model)
    mw = mjw.put_model(model)
    mw.opt.warn_overflow = 0
    dw = mjw.put_data(model, data, nworld=len(ctrl), nconmax=capacity.contacts, njmax=capacity.constraints)
    wp.copy(dw.ctrl, wp.array(ctrl, dtype=float))
    for _ in range(substeps):  # the first launches load every kernel, outside the capture
        mjw.step(mw, dw)
    with wp.ScopedCapture() as capture:
        for _ in range(substeps):
            mjw.step(mw, dw)

    def run() -> None:
        wp.capture_launch(capture.graph)

    return run, wp.synchronize, lambda: float(dw.qpos.numpy()[:, 2].mean())


def timed_block(run, sync, steps: int) -> float:
    sync()
    started = time.perf_counter()
    for _ in range(steps):
        run()
    sync()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", choices=("go1", "g1"), default="g1")
    parser.add_argument("--model", help="an MJCF file instead of --robot")
    parser.add_argument("--worlds", type=int, default=16384)
    parser.add_argument("--substeps", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100, help="control steps per timed block (default 100)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed control steps first (default 20)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ctrl_noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if min(args.worlds, args.substeps, args.steps, args.repeats, args.warmup) < 1:
        parser.error("--worlds, --substeps, --steps, --repeats and --warmup must be at least 1")

    model = load_model(args)
    if not args.model:
        TASK_CFGS[args.robot]().apply_solver_options(model)  # the task's 0.005 s step and solver iterations
    data, ctrl = start_state(model, args)
    engines, startup = {}, {}
    for name, build in (("mjx", mjx_engine), ("warp", warp_engine)):
        started = time.perf_counter()
        run, sync, height = build(model, data, ctrl, args.substeps)
        for _ in range(args.warmup - (name == "warp")):  # Warp's build ran one control step, to load its kernels
            run()
        sync()
        startup[name] = time.perf_counter() - started
        engines[name] = (run, sync, height)
    rates = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, (run, sync, _) in engines.items():
            rates[name].append(args.worlds * args.steps / timed_block(run, sync, args.steps))
    report = {
        "model": args.model or f"rlscale {args.robot}.xml",
        "device": str(jax.devices()[0].device_kind),
        "versions": {"mujoco": mujoco.__version__, "warp": wp.config.version, "jax": jax.__version__},
        "worlds": args.worlds,
        "substeps": args.substeps,
        "timestep_s": float(model.opt.timestep),
        "solver_iterations": int(model.opt.iterations),
        "steps_per_block": args.steps,
        "startup_s": startup,
        "control_steps_per_s": rates,
        "median_control_steps_per_s": {name: statistics.median(values) for name, values in rates.items()},
        "warp_over_mjx": statistics.median(rates["warp"]) / statistics.median(rates["mjx"]),
        "mean_base_height_m": {name: engine[2]() for name, engine in engines.items()},
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
