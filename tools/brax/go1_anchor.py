"""Brax PPO on MuJoCo Playground's Go1JoystickFlatTerrain (MJX, impl="jax"): the anchor for rlscale's Go1 on one GPU.

A standalone measurement tool, not part of rlscale (nothing there imports it); playground and brax are not project
dependencies (tools/brax/README.md says what to install).

It trains as Playground's learning/train_jax_ppo.py does: Playground's tuned config
(locomotion_params.brax_ppo_config: 8192 envs, unroll 20, ...), registry.load with impl="jax", eval env loaded
from the default config, wrapper.wrap_for_brax_training, Playground's domain randomizer (as its locomotion notebook
passes it; train_jax_ppo.py's flag for it defaults off: --no_domain_randomization) and its XLA settings
(--xla_gpu_triton_gemm_any, no preallocation). Unlike train_jax_ppo.py it writes no checkpoints. The JSON at --output
(rewritten atomically at every callback) records versions, device, the PPO config, one record per progress callback
(env steps, wall s since this process started, eval/episode_reward, Brax's training/sps) and the steady training
throughput. Brax's training/sps counts one epoch's steps times num_resets_per_eval (10 here), so it overstates
the epoch rate by that factor; the throughput here is computed from env steps and wall time instead.

Tracking error, like `rlscale evaluate`, at every policy_params_fn callback (unless --skip_tracking_eval): the
deterministic policy on --eval_envs envs, one full episode each, the commands rlscale evaluates with split by env
index modulo 5, held fixed (the env's resampling is defeated by rewriting state.info before every step), no pushes
(pert_config.enable False) and no observation noise (noise_config.level 0), nominal model. Per env: the mean over its
steps, up to its first termination, of |cmd_xy - v_xy| (base frame, from the free joint as rlscale computes it) and
|cmd_yaw - w_z|; fell = terminated before the episode's end. The eval's seconds (and Brax's own eval time) are
subtracted from the wall time, so training_wall_s counts training and compilation only. With --stop_at the run ends
at the first tracking eval within the target (status target_reached, that eval in target_reached).

Offline placeholders. Playground loads the Go1 with the menagerie's unitree_go1/assets (mjx_env.MENAGERIE_PATH) and
git-clones the menagerie when that folder is missing. Its scene XMLs include only Playground's own XMLs; the
menagerie supplies 5 STL meshes (trunk, hip, thigh, thigh_mirror, calf), used only by visual geoms (contype 0,
conaffinity 0), and every body has an explicit <inertial>. So this tool points MENAGERIE_PATH at a temporary folder
holding a small tetrahedron under each name. It checks that the model compiles, that no mesh geom collides and that
body masses and inertias are identical with placeholders of two sizes; it records the total mass (12.74 kg).

jax shim. brax 0.14.2 calls jax.device_put_replicated (and device_put_sharded), which jax 0.11 removed. On one device
putting the leading (device) axis on that device is all they do, so the tool adds them when missing and refuses
(exit 2) when more than one device is visible. JAX_COMPILATION_CACHE_DIR, when set, turns on the persistent cache for
every compilation, so a repeated --throughput_only run loads its programs.
"""

import argparse
import functools
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

START = time.monotonic()  # "process start": before jax, mujoco or brax is imported (the imports above take ms)

ENV_NAME = "Go1JoystickFlatTerrain"
EVALUATION_COMMANDS = ((1.0, 0.0, 0.0), (0.5, 0.0, 0.0), (-0.5, 0.0, 0.0), (0.0, 0.5, 0.0), (0.5, 0.0, 0.5))
"""(v_x, v_y, w_z): rlscale's EVALUATION_COMMANDS (src/rlscale/tasks/locomotion/cfg.py)."""
MESHES = ("trunk", "hip", "thigh", "thigh_mirror", "calf")
THROUGHPUT_EVALS = 4  # --throughput_only: 3 training iterations, so two steady intervals after the compiling one
THROUGHPUT_STEPS_PER_EPOCH = 4  # training steps per epoch in a --throughput_only run (the full run has 14)


def since_start() -> float:
    return time.monotonic() - START


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--num_timesteps", type=int, help="default: the config's (200 M); --throughput_only: 3 short iterations")
    add("--num_envs", type=int, help="default: the config's (8192)")
    add("--batch_size", type=int, help="default: the config's (256); batch_size*num_minibatches divisible by envs")
    add("--num_evals", type=int, help=f"default: the config's (10); --throughput_only: {THROUGHPUT_EVALS}")
    add("--num_resets_per_eval", type=int, help="default: the config's (10); envs reset this often per eval interval")
    add("--episode_length", type=int, help="default: the env config's (1000 steps, 20 s); training and evals")
    add("--seed", type=int, default=1)
    add("--eval_envs", type=int, default=1000, help="tracking-eval envs, split among the 5 commands")
    add("--output", default="go1_anchor.json")
    add("--skip_tracking_eval", action="store_true")
    add("--skip_brax_eval", action="store_true", help="no Brax evaluation (its eval reward): about 40 s each saved")
    add(
        "--stop_at",
        metavar="LIN_ERROR,FALL_RATE",
        type=stop_at,
        help="end the run at the first tracking eval with linear error <= LIN_ERROR m/s and fall rate < FALL_RATE",
    )
    add("--no_domain_randomization", action="store_true")
    add("--throughput_only", action="store_true", help="a short run for a steady env-steps/s: no evals at all")
    args = parser.parse_args(argv)
    for name in ("num_timesteps", "num_envs", "batch_size", "num_evals", "num_resets_per_eval", "episode_length"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.eval_envs < len(EVALUATION_COMMANDS):
        parser.error(f"--eval_envs {args.eval_envs}: need one env per command ({len(EVALUATION_COMMANDS)})")
    if args.stop_at and (args.skip_tracking_eval or args.throughput_only):
        parser.error("--stop_at needs the tracking evals (no --skip_tracking_eval or --throughput_only)")
    return args


def stop_at(text: str) -> tuple[float, float]:
    try:
        lin_error, fall_rate = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LIN_ERROR,FALL_RATE, e.g. 0.25,0.05") from None
    return lin_error, fall_rate


class TargetReached(Exception):
    """Raised from the tracking eval that met --stop_at: it ends brax's training loop."""


def tetrahedron_stl(size: float) -> bytes:
    """A binary STL tetrahedron with outward faces (MuJoCo refuses a mesh of no or negative volume)."""
    v = ((0, 0, 0), (size, 0, 0), (0, size, 0), (0, 0, size))
    faces = ((0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3))
    body = b"".join(struct.pack("<12fH", 0, 0, 0, *(c for i in f for c in v[i]), 0) for f in faces)
    return bytes(80) + struct.pack("<I", len(faces)) + body


def write_placeholders(root: Path, size: float) -> None:
    assets = root / "unitree_go1" / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    for name in MESHES:
        (assets / f"{name}.stl").write_bytes(tetrahedron_stl(size))


def check_placeholders(root: Path) -> dict:
    """Compile the scene with placeholders of two sizes: the dynamics must not depend on them."""
    import mujoco
    import numpy as np
    from mujoco_playground._src.locomotion.go1 import base, go1_constants

    xml = go1_constants.FEET_ONLY_FLAT_TERRAIN_XML.read_text()
    models = []
    for size in (0.5, 0.05):  # the small one stays for the run
        write_placeholders(root, size)
        models.append(mujoco.MjModel.from_xml_string(xml, assets=base.get_assets()))
    big, model = models
    fields = ("body_mass", "body_inertia", "body_ipos", "body_iquat")
    invariant = all(np.array_equal(getattr(big, f), getattr(model, f)) for f in fields)
    meshes = model.geom_type == mujoco.mjtGeom.mjGEOM_MESH
    colliding = int(np.count_nonzero((model.geom_contype | model.geom_conaffinity)[meshes]))
    if not invariant or colliding:
        sys.exit(f"go1_anchor: the placeholder meshes change the dynamics ({colliding} colliding mesh geoms)")
    return {
        "meshes": [f"unitree_go1/assets/{n}.stl" for n in MESHES],
        "placeholder": "tetrahedron, 5 cm edges",
        "total_body_mass_kg": float(model.body_mass.sum()),
        "mesh_geoms": int(meshes.sum()),
        "colliding_mesh_geoms": colliding,
        "mass_and_inertia_identical_with_50cm_placeholders": invariant,
    }


def install_jax_shim(jax) -> list[str]:
    """brax 0.14.2's device_put_replicated/_sharded on jax >= 0.11, for one device only."""
    devices = jax.devices()
    if len(devices) > 1:
        print(f"go1_anchor: {len(devices)} devices visible; the jax shim is one-device only "
              "(set CUDA_VISIBLE_DEVICES to one GPU)", file=sys.stderr)  # fmt: skip
        sys.exit(2)
    import jax.numpy as jnp

    def device_put_replicated(x, devices):
        return jax.tree_util.tree_map(lambda a: jax.device_put(jnp.stack([a] * len(devices)), devices[0]), x)

    def device_put_sharded(shards, devices):
        return jax.tree_util.tree_map(lambda *a: jax.device_put(jnp.stack(a), devices[0]), *shards)

    added = []
    for name, fn in (("device_put_replicated", device_put_replicated), ("device_put_sharded", device_put_sharded)):
        if not hasattr(jax, name):
            setattr(jax, name, fn)
            added.append(f"jax.{name}")
    return added


def make_tracking_eval(jax, env, num_envs: int, episode_length: int):
    """A jitted rollout (make_policy, params, key) -> (per-env mean errors [lin, yaw], fell), and the env commands."""
    import jax.numpy as jnp
    import numpy as np
    from mujoco.mjx._src import math as mjx_math

    env_command = jnp.arange(num_envs) % len(EVALUATION_COMMANDS)
    command = jnp.asarray(EVALUATION_COMMANDS, jnp.float32)[env_command]
    hold = jnp.full((num_envs,), 2**30, jnp.int32)  # steps_until_next_cmd: never reaches 0, so never resampled

    def fix(state):
        return state.replace(info={**state.info, "command": command, "steps_until_next_cmd": hold})

    @functools.partial(jax.jit, static_argnums=0)
    def rollout(make_policy, params, key):
        policy = make_policy(params, deterministic=True)
        state = fix(jax.vmap(env.reset)(jax.random.split(key, num_envs)))
        state = state.replace(obs=jax.vmap(env._get_obs)(state.data, state.info))  # obs with the fixed command

        def step(carry, key):
            state, alive, sums, steps = carry
            state = fix(state)
            action, _ = policy(state.obs, key)
            state = jax.vmap(env.step)(state, action)
            qpos, qvel = state.data.qpos, state.data.qvel
            lin_b = jax.vmap(lambda q, v: mjx_math.rotate(v, mjx_math.quat_inv(q)))(qpos[:, 3:7], qvel[:, :3])
            lin = jnp.linalg.norm(command[:, :2] - lin_b[:, :2], axis=-1)
            errors = jnp.stack((lin, jnp.abs(command[:, 2] - qvel[:, 5])), axis=-1)
            sums = sums + jnp.where(alive[:, None], errors, 0.0)
            return (state, alive & (state.done == 0), sums, steps + alive), None

        carry = (state, jnp.ones(num_envs, bool), jnp.zeros((num_envs, 2)), jnp.zeros(num_envs, jnp.int32))
        (_, alive, sums, steps), _ = jax.lax.scan(step, carry, jax.random.split(key, episode_length))
        return sums / jnp.maximum(steps, 1)[:, None], ~alive

    def on_host(make_policy, params, key):  # pmap's outputs carry its mesh, the first params not: one compile
        return rollout(make_policy, jax.tree_util.tree_map(np.asarray, params), key)

    return on_host, env_command


def summarize(errors, fell, env_command) -> dict:
    import numpy as np

    errors, fell, env_command = np.asarray(errors), np.asarray(fell), np.asarray(env_command)

    def one(mask):
        return {
            "envs": int(mask.sum()),
            "lin_vel_error": float(errors[mask, 0].mean()),
            "yaw_rate_error": float(errors[mask, 1].mean()),
            "fall_rate": float(fell[mask].mean()),
        }

    per_command = [{"command": list(c), **one(env_command == i)} for i, c in enumerate(EVALUATION_COMMANDS)]
    return {**one(np.ones_like(fell, bool)), "per_command": per_command}


def steady_throughput(records: list[dict]) -> dict:
    """Env steps/s between the first progress callback after training began (compile included) and the last."""
    trained = [r for r in records if r["env_steps"] > 0]
    method = (
        "(env steps at the last progress callback - at the first one with env steps > 0) / (training_wall_s "
        "between them: wall time less Brax's eval/walltime and this tool's tracking-eval seconds); the interval "
        "that holds the training compile is left out"
    )
    if len(trained) < 2:
        return {"env_steps_per_s": None, "method": method, "note": "needs two progress callbacks after training began"}
    first, last = trained[0], trained[-1]
    pairs = zip(trained, trained[1:], strict=False)
    result = {
        "env_steps_per_s": (last["env_steps"] - first["env_steps"])
        / (last["training_wall_s"] - first["training_wall_s"]),
        "method": method,
        "intervals_env_steps_per_s": [
            (b["env_steps"] - a["env_steps"]) / (b["training_wall_s"] - a["training_wall_s"]) for a, b in pairs
        ],
    }
    if last.get("training_walltime_brax") is not None:  # Brax's own clock: the training epochs alone
        spent = last["training_walltime_brax"] - first["training_walltime_brax"]
        result["from_brax_training_walltime"] = (last["env_steps"] - first["env_steps"]) / spent
    return result


def write_json(path: Path, result: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def versions() -> dict:
    found = {}
    for dist in ("jax", "jaxlib", "brax", "playground", "mujoco", "mujoco-core", "mujoco-mjx", "flax", "optax"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def main(argv=None) -> None:
    args = parse_args(argv)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    # train_jax_ppo.py's settings, before jax starts its backend.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_triton_gemm_any=True").strip()
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    import jax

    cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    shim = install_jax_shim(jax)

    from etils import epath
    from mujoco_playground._src import mjx_env

    root = Path(tempfile.mkdtemp(prefix="menagerie_placeholders_"))
    mjx_env.MENAGERIE_PATH = epath.Path(root)  # read at call time by get_assets and ensure_menagerie_exists
    try:
        run(args, output, jax, shim, cache_dir, check_placeholders(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args, output: Path, jax, shim: list[str], cache_dir, placeholders: dict) -> None:
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    from mujoco_playground import registry, wrapper
    from mujoco_playground.config import locomotion_params

    ppo_params = locomotion_params.brax_ppo_config(ENV_NAME, "jax")
    for name in ("num_envs", "batch_size", "episode_length", "num_resets_per_eval"):
        if getattr(args, name) is not None:
            ppo_params[name] = getattr(args, name)
    if args.throughput_only:
        ppo_params.num_evals = args.num_evals or THROUGHPUT_EVALS
        per_step = ppo_params.batch_size * ppo_params.unroll_length * ppo_params.num_minibatches
        epochs = (ppo_params.num_evals - 1) * max(ppo_params.num_resets_per_eval, 1)
        ppo_params.num_timesteps = args.num_timesteps or epochs * THROUGHPUT_STEPS_PER_EPOCH * per_step
    else:
        ppo_params.num_evals = args.num_evals or ppo_params.num_evals
        ppo_params.num_timesteps = args.num_timesteps or ppo_params.num_timesteps
    track = not (args.skip_tracking_eval or args.throughput_only)
    run_brax_evals = not (args.skip_brax_eval or args.throughput_only)

    def env_config():
        cfg = registry.get_default_config(ENV_NAME)
        cfg.episode_length = ppo_params.episode_length
        return cfg

    overrides = {"impl": "jax"}
    env = registry.load(ENV_NAME, config=env_config(), config_overrides=overrides)
    eval_env = registry.load(ENV_NAME, config=env_config(), config_overrides=overrides)
    training_params = dict(ppo_params)
    del training_params["network_factory"]
    num_eval_envs = training_params.pop("num_eval_envs", 128)
    network_factory = functools.partial(ppo_networks.make_ppo_networks, **ppo_params.network_factory)
    randomizer = None if args.no_domain_randomization else registry.get_domain_randomizer(ENV_NAME)

    device = jax.devices()[0]
    result = {
        "tool": "tools/brax/go1_anchor.py",
        "argv": sys.argv[1:],
        "env_name": ENV_NAME,
        "impl": "jax",
        "status": "running",
        "versions": versions(),
        "python": sys.version.split()[0],
        "device": {"platform": device.platform, "kind": device.device_kind},
        "jax_shim_added": shim,
        "compilation_cache_dir": cache_dir,
        "xla_flags": os.environ["XLA_FLAGS"],
        "menagerie_placeholders": placeholders,
        "ppo_config": ppo_params.to_dict(),
        "brax_num_eval_envs": num_eval_envs,
        "brax_run_evals": run_brax_evals,
        "stop_at": args.stop_at and {"lin_vel_error_at_most": args.stop_at[0], "fall_rate_below": args.stop_at[1]},
        "target_reached": None,
        "domain_randomization": randomizer is not None,
        "env_config": env._config.to_dict(),
        "tracking_eval": None,
        "start_to_first_progress_s": None,
        "start_to_first_training_progress_s": None,
        "records": [],
        "tracking": [],
        "throughput": None,
    }
    clock = {"tracking_s": 0.0, "brax_eval_s": 0.0}

    def on_term(signum, frame):  # `timeout` ends a long run: keep what it measured
        result["status"] = "interrupted"
        write_json(output, result)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)

    def progress(num_steps, metrics):
        wall = since_start()
        clock["brax_eval_s"] = float(metrics.get("eval/walltime", 0.0))
        spent_in_evals = clock["brax_eval_s"] + clock["tracking_s"]
        metric = lambda name: float(metrics[name]) if name in metrics else None  # noqa: E731
        record = {
            "env_steps": int(num_steps),
            "wall_s": wall,
            "eval_episode_reward": metric("eval/episode_reward"),
            "training_sps_brax": metric("training/sps"),  # overstated num_resets_per_eval times (docstring)
            "training_walltime_brax": metric("training/walltime"),
            "brax_eval_s_cum": clock["brax_eval_s"],
            "tracking_eval_s_cum": clock["tracking_s"],
            "training_wall_s": wall - spent_in_evals,
        }
        result["records"].append(record)
        result["start_to_first_progress_s"] = result["start_to_first_progress_s"] or wall
        if num_steps > 0:
            result["start_to_first_training_progress_s"] = result["start_to_first_training_progress_s"] or wall
        result["throughput"] = steady_throughput(result["records"])
        write_json(output, result)
        reward = "-" if record["eval_episode_reward"] is None else f"{record['eval_episode_reward']:.3f}"
        print(f"progress: {num_steps} env steps, {wall:.1f} s, training {record['training_wall_s']:.1f} s, "
              f"eval reward {reward}", file=sys.stderr)  # fmt: skip

    policy_params_fn = lambda *_: None  # noqa: E731
    if track:
        cfg = env_config()
        cfg.pert_config.enable = False
        cfg.noise_config.level = 0.0
        track_env = registry.load(ENV_NAME, config=cfg, config_overrides=overrides)
        rollout, env_command = make_tracking_eval(jax, track_env, args.eval_envs, ppo_params.episode_length)
        result["tracking_eval"] = {
            "envs": args.eval_envs,
            "episode_steps": ppo_params.episode_length,
            "commands": EVALUATION_COMMANDS,  # by env index modulo 5
            "settings": "deterministic policy, commands held, pert_config.enable False, noise_config.level 0, "
            "nominal model; per env the mean over its steps until its first termination of |cmd_xy - v_xy| (m/s, "
            "base frame) and |cmd_z - w_z| (rad/s); fell = terminated before the episode's end",
        }
        key = jax.random.PRNGKey(args.seed + 1)

        def policy_params_fn(current_step, make_policy, params):
            start = since_start()
            errors, fell = jax.block_until_ready(rollout(make_policy, params, key))
            seconds = since_start() - start
            evals_before = clock["tracking_s"] + clock["brax_eval_s"]
            clock["tracking_s"] += seconds
            summary = summarize(errors, fell, env_command)
            result["tracking"].append(
                {"env_steps": int(current_step), "wall_s": start, "eval_s": seconds,
                 "eval_s_cum_before": evals_before, "training_wall_s": start - evals_before, **summary}
            )  # fmt: skip
            write_json(output, result)
            print(f"tracking: {current_step} env steps, lin error {summary['lin_vel_error']:.3f} m/s, "
                  f"falls {100 * summary['fall_rate']:.1f} %, eval {seconds:.1f} s", file=sys.stderr)  # fmt: skip
            if args.stop_at and summary["lin_vel_error"] <= args.stop_at[0] and summary["fall_rate"] < args.stop_at[1]:
                result["target_reached"] = result["tracking"][-1]
                raise TargetReached

    write_json(output, result)
    try:
        ppo.train(
            **training_params,
            environment=env,
            eval_env=eval_env,
            network_factory=network_factory,
            seed=args.seed,
            wrap_env_fn=wrapper.wrap_for_brax_training,
            randomization_fn=randomizer,
            num_eval_envs=num_eval_envs,
            run_evals=run_brax_evals,
            progress_fn=progress,
            policy_params_fn=policy_params_fn,
        )
    except TargetReached:
        pass
    except BaseException as error:
        result["status"] = f"crashed: {type(error).__name__}: {error}"
        write_json(output, result)
        raise
    result["status"] = "target_reached" if result["target_reached"] else "completed"
    result["wall_s"] = since_start()
    write_json(output, result)
    throughput = (result["throughput"] or {}).get("env_steps_per_s")
    print(f"done: {result['wall_s']:.1f} s, steady {throughput or float('nan'):.0f} env steps/s, {output}",
          file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
