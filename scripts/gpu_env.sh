# Sourced on the GPU machine: unpacks the binaries staged by `scripts/gpu.sh --stage` from
# $CARRY (default .carry/gpu) into $BIN (/tmp/nibble-<carry name>) and points LD_LIBRARY_PATH at
# the carried libraries and the machine's own cuBLAS (too large to carry).
CARRY=${CARRY:-.carry/gpu}
BIN=/tmp/nibble-$(basename "$CARRY")
mkdir -p "$BIN" && tar -C "$BIN" -xzf "$CARRY/bins.tar.gz"
CUBLAS=$(find /usr/local /usr/lib /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$PWD/$CARRY/lib:$(dirname "${CUBLAS:-/usr/local/cuda/lib64/x}"):${LD_LIBRARY_PATH:-}"
export BIN
