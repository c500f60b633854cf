#!/usr/bin/env bash
# The GPU run of a whole scale, rehearsed: the exact sequence a GPU lease runs, from a bundle
# (`python -m gpt1lib.harness.bundle`), in a directory that holds only the checkout and the bundle.
#
#   tools/rehearse_gpu.sh [all|start|wait]
#
#   all    the run in the foreground, then its records copied out (a machine without a command
#          time limit)
#   start  the run in a session of its own (it outlives this command); then waits up to
#          START_MIN minutes, copying the records out after every unit
#   wait   waits up to WAIT_MIN more minutes for the run `start` began, copying likewise
#
# The run is `python -m gpt1lib.harness.reproduce --scale $SCALE --source $BUNDLE --corpus
# $BUNDLE` (gpt1lib.harness.runner): it prints the units and their predicted minutes, runs them,
# and prints each part's minutes beside its prediction at the end ("all done"). Its records go
# to lease/results/$SCALE (never the checkout's results/, which hold the recorded runs). What
# is copied to $OUT (./rehearsal_out where unset): records.tar.gz (results/$SCALE: records,
# manifest, run.json) and run.log.
#
# Environment: BUNDLE (bundle), SCALE (small), START_MIN (9.2), WAIT_MIN (4), OUT, PYTHON
# (python3), FRESH (1 on a workstation: copy the checkout's files and the bundle into a new
# directory WORK, default a mktemp, and run there, so that nothing of this checkout leaks in).
#
# What is specific to this project's GPU machines (an H100: no network, commands of at most
# 10 minutes, a lease of 15 minutes of device time in all, its start and idle seconds included,
# at most 64 MiB carried in, the machine given back 30 s after a command ends) lives here:
#   * Packages: the image (python 3.12, torch 2.11, transformers, tokenizers, numpy, pandas,
#     safetensors, tqdm, pyyaml, matplotlib, seaborn) has what the run imports; datasets,
#     papermill and jupyter are absent and the run imports none of them.
#   * Carry: the bundle (at most 48 MiB): run(command=..., carry=["bundle"]).
#   * Commit: the records' commit comes from GPT1_COMMIT, the commit the copy was made from
#     (FRESH=1 sets it from the checkout here); the machine's copy has no .git of its own.
#   * Time: `start` in the first command, from a copy outside the synced tree:
#       cp -r . /tmp/g && cd /tmp/g && GPT1_COMMIT=<sha> bash tools/rehearse_gpu.sh start
#     then at once `cd /tmp/g && WAIT_MIN=<what the lease has left> bash tools/rehearse_gpu.sh
#     wait`. The machine must not sit idle 30 s between them, or it goes back with the run.
#   * Afterwards, on any CPU: unpack records.tar.gz into results/, then `make book`.
set -euo pipefail

MODE="${1:-all}"
case "$MODE" in all | start | wait) ;; *) echo "usage: $0 [all|start|wait]" >&2 && exit 2 ;; esac
HERE="$(cd "$(dirname "$0")/.." && pwd)"
BUNDLE="${BUNDLE:-bundle}"
SCALE="${SCALE:-small}"
PY="${PYTHON:-python3}"
OUT="${OUT:-rehearsal_out}"
step() { echo "== $* ($(date -u +%H:%M:%S))"; }

if [ "${FRESH:-0}" = 1 ]; then
  WORK="${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/rehearse.XXXXXX")}"
  step "a fresh directory: $WORK"
  mkdir -p "$WORK/checkout"
  GPT1_COMMIT="$(cd "$HERE" && PYTHONPATH="$HERE" "$PY" -c \
    'from gpt1lib.records import git_commit; print(git_commit())')"
  export GPT1_COMMIT
  (cd "$HERE" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c '[ ! -f "{}" ] || cp --parents "{}" "$0"' "$WORK/checkout")
  cp -r "$BUNDLE" "$WORK/checkout/bundle"
  mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)"
  cd "$WORK/checkout"
  FRESH=0 BUNDLE=bundle OUT="$OUT" exec bash tools/rehearse_gpu.sh "$MODE"
fi

cd "$HERE"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
unset GPT1_BPE_DIR
RUN=(-m gpt1lib.harness.reproduce --scale "$SCALE" --source "$BUNDLE" --corpus "$BUNDLE"
  --out-dir lease/runs --results lease/results)
mkdir -p "$OUT"

copy_out() {  # the records so far, replaced whole (a reader never meets a half-written file)
  if [ -d "lease/results/$SCALE" ]; then
    tar -czf "$OUT/.records.tar.gz" --exclude=.lock -C lease "results/$SCALE" && mv "$OUT/.records.tar.gz" \
      "$OUT/records.tar.gz"
  fi
  if [ -f run.log ]; then tail -c 2000000 run.log >"$OUT/.run.log" && mv "$OUT/.run.log" "$OUT/run.log"; fi
}

watch_run() {  # until the run ends or $1 minutes pass, copying out after every unit
  local pid end last="" now
  pid="$(cat run.pid)"
  end=$(($(date +%s) + $(awk "BEGIN { print int($1 * 60) }")))
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
    now="$(stat -c %Y "lease/results/$SCALE/run.json" 2>/dev/null || true)"
    if [ "$now" != "$last" ]; then copy_out && last="$now"; fi
    sleep 2
  done
  copy_out
  if [ "$MODE" = start ]; then sed -n '1,/^total/p' run.log; echo ...; fi
  tail -n 12 run.log
  if kill -0 "$pid" 2>/dev/null; then
    echo "the run goes on (pid $pid): call '$0 wait' at once"
    return 3
  fi
  grep -q "^all done" run.log || { echo "the run ended without finishing: see run.log" && return 1; }
}

status=0
case "$MODE" in
  all)
    step "run"
    "$PY" "${RUN[@]}" 2>&1 | tee run.log || status=$?
    copy_out
    ;;
  start)
    step "run, in the background (records say commit ${GPT1_COMMIT:-of this checkout})"
    setsid nohup "$PY" "${RUN[@]}" >run.log 2>&1 </dev/null &
    echo $! >run.pid
    watch_run "${START_MIN:-9.2}" || status=$?
    ;;
  wait)
    step "wait"
    watch_run "${WAIT_MIN:-4}" || status=$?
    ;;
esac
step "copied to $OUT"
ls -l "$OUT"
exit "$status"
