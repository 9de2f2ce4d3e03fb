#!/usr/bin/env bash
# Issue 28: the default study on a fresh one-GPU host, as `make study` runs it after `make setup` (the lent machine
# has no network, so the carried wheels stand in for the venv). nvidia-ml-py, which the image preinstalls and rlscale
# does not declare, is uninstalled, and CUDA_VISIBLE_DEVICES is unset. The first call records the plan
# (`snakemake -n`); each call then runs the study for at most SECONDS and stops it with SIGINT, so a call on the same
# warm machine continues it (--rerun-incomplete). Once the study is complete, the report is written.
# Each call leaves the study's state in OUT_DIR/study_state.tgz (outputs, logs, Snakemake's metadata; no checkpoints,
# TensorBoard files or JAX cache) and the JAX cache in OUT_DIR/jax_cache.tgz. On a fresh machine, a call that finds
# them in .snap/ (carried) continues from there: tar keeps the files' times, so Snakemake's rerun triggers still hold.
# Usage: tools/gpu_first_hour_study.sh OUT_DIR SECONDS   (after sourcing tools/gpu_env.sh)
set -uo pipefail
out=${1:?output directory}
seconds=${2:?seconds this call may run the study}
mkdir -p "$out"
unset CUDA_VISIBLE_DEVICES JAX_COMPILATION_CACHE_DIR  # a fresh host: the study keeps its own cache in logs/<study>/
python3 -m pip uninstall -y -q nvidia-ml-py 2>&1 | tail -n 1
if python3 -c "import pynvml" 2>/dev/null; then echo "pynvml is still importable: nothing was hidden"; exit 1; fi
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
snakemake=(python3 -m snakemake --workflow-profile workflow/profiles/default)
study=$(python3 -c 'import yaml; print(yaml.safe_load(open("config/config.yaml"))["study"])')
if [ -e .snap/study_state.tgz ] && [ ! -e "results/$study" ]; then
  tar xzf .snap/study_state.tgz && echo "continued from the carried .snap/study_state.tgz"
  [ -e .snap/jax_cache.tgz ] && tar xzf .snap/jax_cache.tgz
  # The carried metadata (2026-12-02) predates c1e0ecd, which moved the interpreter and script paths from the rules'
  # params into their shell commands: the params and code triggers would rerun every finished job. Missing outputs
  # and newer inputs still trigger (a dry run here planned exactly the 33 jobs left); the config is this commit's.
  snakemake+=(--rerun-triggers mtime input)
fi
if [ ! -e ".snakemake/first_hour_started" ]; then
  "${snakemake[@]}" -n > "$out/plan.log" 2>&1
  echo "snakemake -n exit $?"
  mkdir -p .snakemake && date -u +%FT%TZ > .snakemake/first_hour_started
fi
call=$(date -u +%H%M%S)
timeout -s INT -k 60 "$seconds" "${snakemake[@]}" --cores all --rerun-incomplete > "$out/study_$call.log" 2>&1
status=$?
echo "snakemake exit $status (124: stopped by this call's time limit)"
grep -E "^[0-9]+ of [0-9]+ steps" "$out/study_$call.log" | tail -n 1
if [ "$status" = 0 ]; then
  "${snakemake[@]}" --report "results/$study/report.html" > "$out/report.log" 2>&1
  echo "report exit $?"
fi
# The study's outputs so far (bundles, manifests, summary, plots), every job's log and Snakemake's records, in one
# archive (the device tool returns few files); the JAX cache in another.
tar czf "$out/study_state.tgz" --exclude='*.pt' --exclude='*.pth' --exclude='*.tfevents*' --exclude=jax_cache \
  "results/$study" "logs/$study" .snakemake/metadata .snakemake/incomplete .snakemake/first_hour_started 2>/dev/null
tar czf "$out/jax_cache.tgz" "logs/$study/jax_cache" 2>/dev/null
ls -la "$out"
