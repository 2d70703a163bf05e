#!/usr/bin/env bash
# check-includes.sh PROGRAM FILE [HEADER...] - the layering rule of the programs, run by the
# Makefile before it compiles one of their files (programs/, compiler/python/_shardwrite.c).
#
# A program is built on the public headers (include/) and the files of its own folder. Every
# quoted #include of FILE, and of each header of FILE's folder that FILE reaches that way, must
# name a header of include/, one of that folder, or one of HEADERs: the internals PROGRAM is still
# allowed (the Makefile's INTERNAL_PROGRAM). Anything else is an error that names the file, the
# line and the header; exit 1. System headers (<...>) are not checked.
set -u
prog=${1:?usage: check-includes.sh PROGRAM FILE [HEADER...]}
file=${2:?usage: check-includes.sh PROGRAM FILE [HEADER...]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(dirname "$file")
allowed=" $* "
status=0
declare -A seen=()
queue=("$file")
while [ ${#queue[@]} -gt 0 ]; do
  f=${queue[0]}
  queue=("${queue[@]:1}")
  [ -n "${seen[$f]:-}" ] && continue
  seen[$f]=1
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    h=${BASH_REMATCH[1]}
    if [ -f "$dir/$h" ]; then
      queue+=("$dir/$h")                      # its own folder: checked in turn
    elif [ -f "$root/include/$h" ]; then
      :                                       # a public header
    elif [[ $allowed == *" $h "* ]]; then
      :                                       # an internal on the program's list
    else
      echo "$f:$n: #include \"$h\": not a public header (include/) nor one of $dir/;" \
           "$prog may include no other library header (Makefile: INTERNAL_$prog)" >&2
      status=1
    fi
  done <"$f"
done
exit $status
