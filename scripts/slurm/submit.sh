#!/usr/bin/env bash
# Submit a build in N parts and its merge, the merge held until every part succeeded:
#   scripts/slurm/submit.sh N SRC OUT [shardc build options]
# (the two sbatch commands of docs/CLI.md, with the job id passed along).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: scripts/slurm/submit.sh N SRC OUT [shardc build options]" >&2
  exit 2
fi
n=$1 src=$2 out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
jid=$(sbatch --parsable --array=0-$((n - 1)) --export=ALL,PARTS="$n" \
  "$here/build-parts.sbatch" "$src" "$out" "$@")
jid=${jid%%;*}
mid=$(sbatch --parsable --dependency=afterok:"$jid" "$here/merge.sbatch" "$out")
echo "parts: job array $jid (0-$((n - 1))); merge: job ${mid%%;*} (after all parts succeed)"
