#!/usr/bin/env bash
# check-ptx.sh [PTXAS] -- check that ptx/reduce_*.ptx are what
# kernels/gen_ptx.py makes, then assemble every ptx/*.ptx with ptxas.
#
# ptx/reduce_<type>.ptx are generated (python3 kernels/gen_ptx.py): the first
# step regenerates them into a temporary directory and fails, with a diff, if
# a committed file differs (edit the generator, never the output).
#
# The PTX kernels are JIT-compiled by the CUDA driver at run time, so a
# typo would only show up on a GPU machine.  ptxas needs no GPU, so CI runs
# it on every module, for the H200's architecture (sm_90).
#
#   PTXAS     path to ptxas; empty or absent: `ptxas` on PATH, else the one
#             in Python's site-packages from `pip install nvidia-cuda-nvcc`
#             (nvidia/cu13/bin/ptxas).
#   PTX_ARCH  target architecture, default sm_90.
#
# Prints ptxas's resource usage per file, warns about register spills, and
# exits non-zero at the first file that fails to assemble, or whose committed
# ahead-of-time image ptx/$PTX_ARCH/<name>.cubin differs from ptxas's output
# (UPDATE_CUBINS=1 rewrites those images instead; the engine embeds them).
set -euo pipefail

ARCH="${PTX_ARCH:-sm_90}"
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null || (cd "$script_dir/.." && pwd))"

# ---- the generated modules are what the generator makes ----------------
PYTHON="$(command -v python3 || command -v python || true)"
if [[ -z "$PYTHON" ]]; then
    echo "check-ptx: python3 not found (needed for kernels/gen_ptx.py --check)" >&2
    exit 2
fi
if ! "$PYTHON" "$root/kernels/gen_ptx.py" --check; then
    echo "check-ptx: FAILED: ptx/ differs from kernels/gen_ptx.py; run python3 kernels/gen_ptx.py && UPDATE_CUBINS=1 bash .ci/check-ptx.sh" >&2
    exit 1
fi

# ---- locate ptxas ------------------------------------------------------
find_ptxas() {
    if command -v ptxas >/dev/null 2>&1; then
        command -v ptxas
        return 0
    fi
    local py dir
    for py in python3 python; do
        command -v "$py" >/dev/null 2>&1 || continue
        # Every site-packages this interpreter knows about (system + user).
        while IFS= read -r dir; do
            if [[ -n "$dir" && -x "$dir/nvidia/cu13/bin/ptxas" ]]; then
                echo "$dir/nvidia/cu13/bin/ptxas"
                return 0
            fi
        done < <("$py" - <<'EOF' 2>/dev/null || true
import site, sysconfig
dirs = []
try:
    dirs += site.getsitepackages()
except Exception:
    pass
try:
    dirs.append(site.getusersitepackages())
except Exception:
    pass
dirs += [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
print("\n".join(dict.fromkeys(d for d in dirs if d)))
EOF
        )
    done
    return 1
}

PTXAS="${1:-}"
if [[ -z "$PTXAS" ]]; then
    if ! PTXAS="$(find_ptxas)"; then
        echo "check-ptx: ptxas not found on PATH nor in Python's site-packages" >&2
        echo "check-ptx: install it with: python3 -m pip install nvidia-cuda-nvcc==13.0.88" >&2
        exit 2
    fi
fi
if [[ ! -x "$PTXAS" ]]; then
    echo "check-ptx: '$PTXAS' is not an executable ptxas" >&2
    exit 2
fi

# ---- assemble each module ----------------------------------------------
shopt -s nullglob
files=("$root"/ptx/*.ptx)
if (( ${#files[@]} == 0 )); then
    echo "check-ptx: no PTX files found in $root/ptx" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "check-ptx: using $PTXAS ($("$PTXAS" --version | tail -n 1))"
count=0
for f in "${files[@]}"; do
    rel="${f#"$root"/}"
    log="$tmp/ptxas.log"
    if ! "$PTXAS" -arch="$ARCH" -v -o "$tmp/out.cubin" "$f" >"$log" 2>&1; then
        cat "$log" >&2
        echo "check-ptx: FAILED: ptxas could not assemble $rel for $ARCH" >&2
        exit 1
    fi
    # Per kernel: "Compiling entry function 'x'", the spill line, "Used N registers".
    echo "== $rel"
    grep -E "Compiling entry function|spill|Used [0-9]+ registers" "$log" | sed 's/^/   /'
    # The LL and Simple ring kernels' grids assume 4 resident blocks of 256 threads an SM
    # (src/cuda/kernels.rs LL_BLOCKS_PER_SM): at most 64 registers a thread.
    over="$(awk '/Compiling entry function .rr_ring(ll|simple)/ {ll=1; next}
                 /Compiling entry function/ {ll=0}
                 ll && match($0, /Used [0-9]+ registers/) {
                     n = substr($0, RSTART + 5, RLENGTH - 15) + 0; if (n > 64) print n }' "$log")"
    if [[ -n "$over" ]]; then
        echo "check-ptx: FAILED: an LL or Simple ring kernel of $rel uses more than 64 registers ($over): 4 blocks an SM no longer fit" >&2
        exit 1
    fi
    if grep -Eq "[1-9][0-9]* bytes spill (stores|loads)" "$log"; then
        echo "check-ptx: WARNING: $rel spills registers to local memory" >&2
    fi
    # The committed ahead-of-time cubin (loaded instead of a JIT compile on
    # GPUs of this architecture) must be exactly what ptxas makes of the PTX.
    name="$(basename "$f" .ptx)"
    cubin="$root/ptx/$ARCH/$name.cubin"
    if [[ "${UPDATE_CUBINS:-0}" == 1 ]]; then
        mkdir -p "$root/ptx/$ARCH"
        cp "$tmp/out.cubin" "$cubin"
        echo "   wrote ptx/$ARCH/$name.cubin"
    elif [[ ! -f "$cubin" ]]; then
        echo "check-ptx: FAILED: ptx/$ARCH/$name.cubin is missing; run UPDATE_CUBINS=1 bash .ci/check-ptx.sh" >&2
        exit 1
    elif ! cmp -s "$tmp/out.cubin" "$cubin"; then
        echo "check-ptx: FAILED: ptx/$ARCH/$name.cubin is not what ptxas makes of $rel; run UPDATE_CUBINS=1 bash .ci/check-ptx.sh" >&2
        exit 1
    else
        echo "   ptx/$ARCH/$name.cubin matches"
    fi
    count=$((count + 1))
done

echo "ptxas: $count files assembled for $ARCH"
