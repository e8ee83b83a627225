#!/usr/bin/env bash
# What a Lua script costs Redis beside the bare command it wraps: Redis's own
# CPU per call (`INFO commandstats`, usec_per_call) for a bare `SET NX PX`,
# an empty script, a script that does only that `SET NX PX`, and idem's
# begin script on a new key; then a bare `SET PX` and a script doing only
# that (the completion's write). Each is driven by `redis-benchmark -c 32`
# with 200 000 fresh random keys, the cases interleaved over 5 rounds; the
# medians are printed. Keys live under `idem-script-cost:` and are deleted
# before each case and at the end.
#
#   scripts/redis-script-cost.sh [redis-host] [port]
#
# Needs redis-cli and redis-benchmark (Debian's redis-tools) and a Redis to
# measure; `INFO commandstats` is reset on it.
set -euo pipefail

host=${1:-127.0.0.1}
port=${2:-6379}
here=$(cd "$(dirname "$0")/.." && pwd)
cli=(redis-cli -h "$host" -p "$port")
prefix='idem-script-cost:'
rounds=5
fp=abcdefghijabcdefghijabcdefghij12

clean() {
  "${cli[@]}" --scan --pattern "${prefix}*" | xargs -r -n 1000 "${cli[@]}" UNLINK >/dev/null
}
trap clean EXIT

load() { "${cli[@]}" SCRIPT LOAD "$1"; }
empty=$(load 'return 1')
setnx=$(load "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0")
setpx=$(load "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1")
begin=$(load "$(cat "$here/crates/idem-redis/src/lua/begin.lua")")

# usec per call of `$1` (a commandstats name) while redis-benchmark runs the rest.
cost() {
  local cmd=$1
  shift
  clean
  "${cli[@]}" CONFIG RESETSTAT >/dev/null
  redis-benchmark -h "$host" -p "$port" -q -c 32 -n 200000 -r 100000000 --csv "$@" >/dev/null 2>&1
  "${cli[@]}" INFO commandstats | grep "^cmdstat_${cmd}:" | sed 's/.*usec_per_call=//; s/,.*//'
}

key="${prefix}__rand_int__"
names=("bare SET NX PX" "empty script" "script doing only SET NX PX" "idem's begin script, new key" "bare SET PX" "script doing only SET PX")
declare -a results
for ((r = 1; r <= rounds; r++)); do
  results[0]+="$(cost set SET "$key" "$fp" NX PX 10000) "
  results[1]+="$(cost evalsha EVALSHA "$empty" 0) "
  results[2]+="$(cost evalsha EVALSHA "$setnx" 1 "$key" "$fp" 10000) "
  results[3]+="$(cost evalsha EVALSHA "$begin" 1 "$key" "$fp" 10000 0) "
  results[4]+="$(cost set SET "$key" "$fp" PX 10000) "
  results[5]+="$(cost evalsha EVALSHA "$setpx" 1 "$key" "$fp" 10000) "
  echo "round $r done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "Redis CPU per call, median of $rounds rounds (usec_per_call):"
for i in "${!names[@]}"; do
  printf '  %-32s %s us  (rounds: %s)\n' "${names[$i]}" "$(echo "${results[$i]}" | median)" "${results[$i]% }"
done
