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
