# Stage lines for long shell work (sourced): the tiny model's build (recipes/run_cpu_tiny_slca.sh) and the setups
# (scripts/*_setup.sh). Each stage prints "[NAME N/TOTAL] WHAT (~M min left)" on stderr, the time left being the
# stages' expected durations from stage N on, scaled by the pace of the stages done so far (elapsed / their expected
# time; the expected durations are what an idle 2-core machine takes, so a loaded one shows its own pace from stage 2
# on). The same wording as slca_verl/progress.py, which the python steps use for their own progress.
#
#   progress_start NAME SECONDS_1 SECONDS_2 ...     the stages' expected durations, in seconds
#   progress_stage N WHAT                           stage N begins
#   progress_done                                   "[NAME] done in M min"

progress_start() {
  { local _xt=$-; set +x; } 2> /dev/null
  _PROGRESS_NAME=$1
  shift
  _PROGRESS_EXPECTED=("$@")
  _PROGRESS_T0=${SECONDS}
  [[ "${_xt}" != *x* ]] || set -x
}

# _progress_duration SECONDS: "~45 s" below 90 s, else "~N min"
_progress_duration() {
  if (($1 < 90)); then echo "~$(($1 < 1 ? 1 : $1)) s"; else echo "~$((($1 + 30) / 60)) min"; fi
}

progress_stage() {
  { local _xt=$-; set +x; } 2> /dev/null
  local n=$1 what=$2 total=${#_PROGRESS_EXPECTED[@]} done_s=0 left_s=0 i
  local elapsed=$((SECONDS - _PROGRESS_T0))
  for ((i = 0; i < total; i++)); do
    if ((i < n - 1)); then done_s=$((done_s + _PROGRESS_EXPECTED[i])); else left_s=$((left_s + _PROGRESS_EXPECTED[i])); fi
  done
  ((done_s > 0 && elapsed > 0)) && left_s=$((left_s * elapsed / done_s))
  echo "[${_PROGRESS_NAME} ${n}/${total}] ${what} ($(_progress_duration "${left_s}") left)" >&2
  [[ "${_xt}" != *x* ]] || set -x
}

progress_done() {
  { local _xt=$-; set +x; } 2> /dev/null
  echo "[${_PROGRESS_NAME}] done in $(_progress_duration $((SECONDS - _PROGRESS_T0)))" >&2
  [[ "${_xt}" != *x* ]] || set -x
}
