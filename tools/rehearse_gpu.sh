#!/usr/bin/env bash
# The GPU run of a whole scale, rehearsed: the exact sequence a short GPU lease runs, from a
# bundle (`python -m gpt1lib.harness.bundle`), in a directory that holds only the checkout and the bundle.
#
#   tools/rehearse_gpu.sh [all|start|wait]
#
#   all    every step in the foreground (a machine without a command time limit)
#   start  steps 1-2, then the run in a session of its own (it outlives this command), waiting
#          up to WAIT_MIN minutes for it; then step 4
#   wait   wait up to WAIT_MIN more minutes for the run `start` began; then step 4
#
# Steps:
#   1. wheels  install what the image lacks from .whl/ (skipped where there is no .whl/)
#   2. plan    python -m gpt1lib.harness.reproduce ... --budget $BUDGET --plan-only: times a few steps,
#              prints the plan and keeps it (results/$SCALE/plan.json)
#   3. run     the same command without --plan-only: resumes that plan, one process, records
#              written to results/$SCALE/<chapter>.jsonl as each unit finishes
#   4. copy    results/$SCALE (records, manifest, plan) packed into $OUT/records.tar.gz, with
#              the plan and the log's tail ($OUT/plan.txt, $OUT/run.log); ./rehearsal_out
#              where OUT is unset
#
# Environment: BUNDLE (bundle), SCALE (small), BUDGET (22, minutes of accelerator time: a plan
# of 22 ran 24.0 on an H100, 2026-11-24; the plan now times the loops themselves and prints
# each part's minutes beside its prediction at the end),
# WAIT_MIN (9), OUT, PYTHON (python3), FRESH (1 on a workstation: copy the checkout's files
# and the bundle into a new directory WORK, default a mktemp, and run there, so that nothing
# of this checkout, its runs/, results/ or an installed gpt1lib, leaks in).
#
# What is specific to this project's GPU machines (an H100: no network, commands of at most
# 10 minutes, at most 64 MiB carried in and 8 files / 64 MiB back per command, the machine
# given back 30 s after a command ends) lives here, not in the library:
#   * Wheels: none is needed for the run. The image (read 2026-11-17: python 3.12, torch 2.11,
#     transformers, tokenizers, numpy, pandas, scikit-learn, scipy, safetensors, tqdm, pyyaml,
#     matplotlib, seaborn) has what it imports; datasets, papermill and jupyter are absent and
#     the run imports none of them. Any other package travels as a wheel in .whl/ (the device
#     README says how to `pip download` one for python 3.12 / manylinux x86_64).
#   * Carry: the bundle (at most 48 MiB) and .whl/ if any: run(command=..., carry=["bundle"]).
#     The checkout itself is about 2 MiB.
#   * Commit: the records' commit comes from GPT1_COMMIT, the commit the copy was made from
#     (FRESH=1 sets it from the checkout here). The machine's copy carried a .git of the
#     session's first commit (2026-11-22), which would name the wrong one: always set it there.
#     Step 2 prints the commit the records will say.
#   * Time: `start` in the first command, run from a copy outside the synced tree (so that a
#     later command's tree never meets the run's files):
#       cp -r . /tmp/g && cd /tmp/g && GPT1_COMMIT=<sha> BUDGET=22 bash tools/rehearse_gpu.sh start
#     then `cd /tmp/g && bash tools/rehearse_gpu.sh wait` in back-to-back commands until it
#     prints "plan done". Every command leaves the records so far in $OUT. A machine given back
#     between commands (more than 30 s idle) takes the run and its checkpoints with it: the
#     records already copied out stay usable.
#   * Afterwards, on any CPU: unpack records.tar.gz into results/, then `make book`.
set -euo pipefail

MODE="${1:-all}"
case "$MODE" in all | start | wait) ;; *) echo "usage: $0 [all|start|wait]" >&2 && exit 2 ;; esac
HERE="$(cd "$(dirname "$0")/.." && pwd)"
BUNDLE="${BUNDLE:-bundle}"
SCALE="${SCALE:-small}"
BUDGET="${BUDGET:-22}"
WAIT_MIN="${WAIT_MIN:-9}"
PY="${PYTHON:-python3}"
step() { echo "== $* ($(date -u +%H:%M:%S))"; }
commit() {  # the commit records made here say (gpt1lib.records.git_commit)
  (cd "$HERE" && PYTHONPATH="$HERE" "$PY" -c 'from gpt1lib.records import git_commit; print(git_commit())')
}

if [ "${FRESH:-0}" = 1 ]; then
  WORK="${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/rehearse.XXXXXX")}"
  step "a fresh directory: $WORK"
  mkdir -p "$WORK/checkout"
  GPT1_COMMIT="$(commit)"  # the checkout's, said by the copy's records
  export GPT1_COMMIT
  (cd "$HERE" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c '[ -f "{}" ] && cp --parents "{}" "$0"' "$WORK/checkout")
  cp -r "$BUNDLE" "$WORK/checkout/bundle"
  if [ -d "$HERE/.whl" ]; then cp -r "$HERE/.whl" "$WORK/checkout/.whl"; fi
  cd "$WORK/checkout"
  FRESH=0 BUNDLE=bundle exec bash tools/rehearse_gpu.sh "$MODE"
fi

cd "$HERE"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
unset GPT1_BPE_DIR
ARGS=(--scale "$SCALE" --source "$BUNDLE" --corpus "$BUNDLE" --budget "$BUDGET"
  --out-dir runs --results results)

copy_out() {
  step "4/4 copy the records out"
  local out="${OUT:-rehearsal_out}"
  mkdir -p "$out"
  if [ -d "results/$SCALE" ]; then tar -czf "$out/records.tar.gz" "results/$SCALE"; fi
  if [ -f plan.txt ]; then cp plan.txt "$out/plan.txt"; fi
  if [ -f run.log ]; then tail -c 2000000 run.log >"$out/run.log"; fi
  ls -l "$out"
}

wait_run() {  # until the run ends or WAIT_MIN minutes pass; 0: done, 3: still running
  local pid end
  pid="$(cat run.pid)"
  end=$(($(date +%s) + ${WAIT_MIN%.*} * 60))
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
  tail -n 5 run.log
  if kill -0 "$pid" 2>/dev/null; then
    echo "the run goes on (pid $pid): call '$0 wait' again"
    return 3
  fi
  grep -q "^plan done" run.log || { echo "the run ended without finishing: see run.log" && return 1; }
}

if [ "$MODE" != wait ]; then
  step "1/4 wheels"
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
  else
    echo "no .whl folder: nothing to install"
  fi
  "$PY" -c "import gpt1lib.harness.plan_run" ||
    { echo "a module the run needs is missing: put its wheel in .whl/" && exit 1; }
  step "2/4 plan (records say commit $(commit))"
  "$PY" -m gpt1lib.harness.reproduce "${ARGS[@]}" --plan-only | tee plan.txt
fi

step "3/4 run"
status=0
case "$MODE" in
  all) "$PY" -m gpt1lib.harness.reproduce "${ARGS[@]}" 2>&1 | tee run.log || status=$? ;;
  start)
    setsid nohup "$PY" -m gpt1lib.harness.reproduce "${ARGS[@]}" >run.log 2>&1 </dev/null &
    echo $! >run.pid
    wait_run || status=$?
    ;;
  wait) wait_run || status=$? ;;
esac
copy_out
exit "$status"
