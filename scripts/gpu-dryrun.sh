#!/usr/bin/env bash
# Dry run of a gpu-check.sh mode on a machine without a GPU or NCCL:
#   scripts/gpu-dryrun.sh processes     (OUT defaults to ./gpu-dryrun-out)
# A shim in place of the staged binary runs the real one with `cuda` -> `cpu`,
# `auto,nccl` -> `auto,ring`, large sizes -> 1MiB, and `check ...` -> a `run`
# (check needs NCCL). It checks that every step of the mode runs, not results.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-processes}"
REAL="$PWD/target/release/ringreduce"
cargo build --release -q
D="$(mktemp -d)"
trap 'rm -rf "$D"' EXIT
cp scripts/gpu-check.sh scripts/record-command.sh "$D/"
cat > "$D/ringreduce" <<SHIM
#!/usr/bin/env bash
args=()
for a in "\$@"; do
  case "\$a" in cuda) a=cpu ;; auto,nccl) a=auto,ring ;; 256MiB|1GiB|1GiB+16) a=1MiB ;; esac
  args+=("\$a")
done
out=(); skip=0
for ((i=0; i<\${#args[@]}; i++)); do
  a="\${args[\$i]}"
  if [ "\$a" = check ]; then out+=(run --backend cpu --size 64KiB); skip=1; continue; fi
  if [ \$skip = 1 ]; then [ "\$a" = --timeout ] && { out+=("\$a" "\${args[\$((i+1))]}"); i=\$((i+1)); }; continue; fi
  out+=("\$a")
done
exec "$REAL" "\${out[@]}"
SHIM
chmod +x "$D/ringreduce"
OUT="${OUT:-$PWD/gpu-dryrun-out}" bash "$D/gpu-check.sh" "$MODE"
