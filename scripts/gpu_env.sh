# Sourced on the GPU machine: unpacks the binaries staged by `scripts/gpu.sh --stage` from
# $CARRY (default .carry/gpu) into $BIN (/tmp/nibble-<carry name>) and points LD_LIBRARY_PATH at
# the carried libraries and the machine's own cuBLAS (too large to carry); NIBBLE_DATA at the
# carried data/ when there is one and NIBBLE_DATA is not set.
CARRY=${CARRY:-.carry/gpu}
BIN=/tmp/nibble-$(basename "$CARRY")
mkdir -p "$BIN" && tar -C "$BIN" -xzf "$CARRY/bins.tar.gz"
CUBLAS=$(find /usr/local /usr/lib /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$PWD/$CARRY/lib:$(dirname "${CUBLAS:-/usr/local/cuda/lib64/x}"):${LD_LIBRARY_PATH:-}"
export BIN
if [ -z "${NIBBLE_DATA:-}" ] && [ -d "$CARRY/data" ]; then export NIBBLE_DATA="$PWD/$CARRY/data"; fi
