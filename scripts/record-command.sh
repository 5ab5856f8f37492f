# Sourced by the scripts/gpu-*.sh (and, staged, .device/gpu-check.sh).
# The run's command file (docs/results/README.md, "A new run"): date,
# machine, commit and the exact command with the settings it read, appended
# to DIR/command.txt so that the folder copied into docs/results/ says them.
record_command() {
    local dir=$1; shift
    { echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
      echo "# machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | tr -s ' ' | paste -sd ';' -)"
      echo "# commit: $(cat .device/COMMIT "$(dirname "$0")/COMMIT" 2>/dev/null | head -1)"
      echo "# command: $(env | grep -E '^(BENCH_PARTS|NODES_AB|NODES_NEWCOMER|TESTS|AB_[A-Z]+|PARTS|CUPTI_[A-Z]+|PROC_DIAG|COMM_BACKEND|TIMELINE_BACKEND|GPU_CHECK_LIMIT_S|RINGREDUCE_[A-Z_]+|NCCL_[A-Z_]+)=' | sort | tr '\n' ' ')bash $0 $*"
    } >> "$dir/command.txt"
}

# A record's device script in two lines (the preamble every one repeated):
#   . .device/record-command.sh; record_start NAME "$@"
# makes $O ($OUT/NAME), writes its command file and the machine's facts,
# exports the settings every run uses (NVLS off, the staged binary for
# the tests, their host-memory cap) and sets RR to the staged binary; then
#   step LOG SECONDS COMMAND...
# appends COMMAND's output to $O/LOG.log under a timeout and its exit
# status and duration to $O/command.txt.
record_start() {
    O=${OUT:-$PWD/out}/$1; shift
    mkdir -p "$O"
    record_command "$O" "$@"
    export NCCL_NVLS_ENABLE=0
    export RINGREDUCE_BIN="$PWD/.device/ringreduce" RINGREDUCE_HOST_MEMORY=200GiB
    RR=.device/ringreduce
    { date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader; nproc; } >> "$O/command.txt" 2>&1
}

step() {
    local name=$1 t=$2; shift 2
    local a
    a=$(date +%s)
    echo "== $*" >> "$O/$name.log"
    timeout "$t" "$@" >> "$O/$name.log" 2>&1
    echo "$name: exit $? in $(( $(date +%s) - a )) s ($*)" | tee -a "$O/command.txt"
}
