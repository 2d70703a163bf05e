#!/usr/bin/env bash
# End to end: SHR_ACCESS_DIRECT's batched reads (reader/direct.c) deliver exactly what the mmap
# path delivers: the same batch checksum in every order, thread count and batch size, for shards
# whose samples are read in place (sizes the O_DIRECT alignment divides), through staging (odd
# sizes), compressed, of version 1 and 2, through io_uring and through the pread fallback.
. "$(dirname "$0")/lib.sh"
SHARDBENCH="$ROOT/$BUILD/bin/shardbench"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 14 --seed 9 --quiet --no-broken || { echo "mksample failed"; exit 1; }

b() { "$SHARDC" build "$T/src" -o "$T/$1" -j2 --no-progress "${@:2}" >/dev/null 2>&1 || bad "build $1"; }
b aligned --size 64x48 --shard-samples 16          # 9216 bytes: read in place, runs merged
b odd --size 37x23 --shard-samples 11              # 2553 bytes: staged, neighbours merged
b big --size 160x120 --shard-samples 20            # 57600 bytes, 64-KiB runs of one
b v1 --size 37x23 --align 4096 --shard-samples 11  # version 1
b gray --size 40x40 --gray
b lz4 --size 64x48 --compress lz4 --shard-samples 16
b zstd --size 37x23 --compress zstd --shard-samples 11

sum() {   # DATASET ORDER THREADS BATCH ACCESS
  "$SHARDBENCH" read "$1" --checksum --json -e 2 --order "$2" -j "$3" -b "$4" --access "$5" 2>"$T/err" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["checksum"])' 2>/dev/null
}
for ds in aligned odd big v1 gray lz4 zstd; do
  all=1
  for order in seq random quasi; do
    for bs in 5 64; do
      want=$(sum "$T/$ds" "$order" 1 "$bs" mmap)
      [ -n "$want" ] || { all=0; echo "       $ds $order: no mmap checksum"; sed 's/^/       /' "$T/err"; }
      for run in "1 0" "2 0" "2 1"; do
        set -- $run
        got=$(SHR_DIRECT_NO_URING=$2 sum "$T/$ds" "$order" "$1" "$bs" direct)
        [ "$got" = "$want" ] || { all=0; echo "       $ds $order -j$1 -b$bs no_uring=$2: $got, mmap $want"; }
      done
    done
  done
  check "$ds: direct gives mmap's batch checksum (seq, random, quasi; 1-2 threads; io_uring and pread)" [ $all -eq 1 ]
done

finish
