#!/usr/bin/env bash
# The README's quick start on a fresh Debian machine. Creates a minimal Debian root with
# debootstrap (minbase), adds only make, git and ca-certificates, clones the commit under test
# into it and runs the README's two commands exactly as written (`make demo`, then `make test`,
# plain build), as root inside the root, so that scripts/deps.sh has to install everything else.
# Fails if either command fails, or if a test the README's exactness claims rest on skipped or did
# not run there: tests/e2e_torchvision.sh, tests/e2e_pixels.sh, every tests/python file that uses
# torchvision, and any test output that skips a Pillow/torchvision comparison or a test for want
# of a Python module.
#
#   scripts/fresh-debian.sh [options] [COMMIT]      (as root; COMMIT defaults to HEAD)
#     -w, --workdir DIR   work in DIR (created if missing; DIR/root must not exist); the root and
#                         the clone are removed at the end, DIR/logs is kept. Default: a new
#                         directory under /var/tmp, removed at the end.
#     -k, --keep          keep the root (unmounted) and the logs, to look at after the run
#     -r, --repo DIR      the repository to clone (default: the one holding this script)
#     -m, --mirror URL    Debian mirror (default: read from this machine's apt sources)
#     -s, --suite NAME    Debian suite (default: bookworm, Debian 12)
#
# What it takes from the machine: the Debian entries of its apt sources (/etc/apt/sources.list,
# /etc/apt/sources.list.d/*.list and *.sources) become the root's sources, the first one for the
# suite is debootstrap's mirror; apt proxy settings are passed on; the machine's downloaded
# packages (/var/cache/apt/archives) are debootstrap's --cache-dir and are bind-mounted into the
# root, so only packages missing there are downloaded (and then kept there for the next run).
# debootstrap is installed by scripts/deps.sh --ci when missing.
#
# Environment of the root: /proc, /sys and /dev from the machine, /dev/pts, a fresh tmpfs on
# /dev/shm (Python's multiprocessing and Open MPI need it), the machine's resolv.conf and hosts,
# a policy-rc.d that keeps package scripts from starting services, dpkg's force-unsafe-io (a root
# thrown away at the end needs no fsync). The commands run with a clean login environment
# (env -i: HOME, PATH, USER, LOGNAME, SHELL) as root. The only addition to `make test` is
# PYTEST_ADDOPTS=--junitxml=FILE: a report of each pytest test's outcome, read by the skip check.
#
# Everything that mounts runs in its own mount and PID namespaces (unshare): the mounts are never
# visible outside, and die with the namespace whatever ends the run (a SIGKILL included). On
# every exit (success, failure, INT/TERM/HUP) the processes in the root are ended, everything is
# unmounted (checked with findmnt) and the work directory is removed unless --keep.
#
# Each phase prints how long it took; a table of all of them closes the run. Exit status: 0 all
# passed, 1 a command failed or a required test skipped, 2 usage or setup error.
set -euo pipefail

SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
APT_CACHE=/var/cache/apt/archives
NEED_WORK_GIB=10   # the root with every package deps.sh installs, the build and the tests' files
NEED_CACHE_GIB=2   # room for packages the cache does not hold yet

say() { printf '[fresh-debian] %s\n' "$*"; }
die() { printf '[fresh-debian] error: %s\n' "$*" >&2; exit 2; }

# ---- phase timing: one "name seconds status" line per phase in $FD_WORK/phases ----
PHASE= PHASE_T0=
phase_begin() { PHASE=$1; PHASE_T0=$(date +%s); say "== phase: $PHASE"; }
phase_end() {  # phase_end STATUS
  local s=$(( $(date +%s) - PHASE_T0 ))
  printf '%s\t%s\t%s\n' "$PHASE" "$s" "$1" >> "$FD_WORK/phases"
  say "== phase: $PHASE: $1 in $(fmt_secs "$s")"
  PHASE=
}
fmt_secs() { printf '%dm%02ds' $(( $1 / 60 )) $(( $1 % 60 )); }

# descendants of a process (children first listed after their parent)
descendants() {
  local p c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done
}

# ==== inner part: runs as PID 1 of private mount and PID namespaces (unshare) ====
inner_main() {
  # globals: the EXIT trap runs after this function has returned
  ROOT=$FD_WORK/root LOGS=$FD_WORK/logs MOUNTS=() CHILD= CLEANED=0

  # the processes of this run: those whose root is $ROOT, and the running phase's process tree
  end_processes() {
    local sig pids p r i
    for sig in TERM KILL; do
      pids=()
      [ -n "$CHILD" ] && pids+=("$CHILD" $(descendants "$CHILD"))
      for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        [ "$r" = "$ROOT" ] && pids+=("${p#/proc/}")
      done
      [ ${#pids[@]} -eq 0 ] && return 0
      [ "$sig" = KILL ] && say "ending ${#pids[@]} process(es) still running in the root"
      kill -s "$sig" "${pids[@]}" 2>/dev/null || true
      for i in $(seq 50); do
        local alive=0
        for p in "${pids[@]}"; do [ -e "/proc/$p" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] && alive=1; done
        [ $alive -eq 0 ] && return 0
        sleep 0.1
      done
    done
  }

  mounted_under_root() { findmnt -rn -o TARGET | awk -v r="$ROOT" '$0 == r || index($0, r "/") == 1'; }

  inner_cleanup() {
    [ $CLEANED -eq 1 ] && return 0
    CLEANED=1
    end_processes
    local i left
    for (( i=${#MOUNTS[@]}-1; i>=0; i-- )); do
      umount -R "${MOUNTS[i]}" 2>/dev/null || umount -R -l "${MOUNTS[i]}" 2>/dev/null || true
    done
    # debootstrap's own mounts, if it was stopped half way
    left=$(mounted_under_root | sort -r)
    for i in $left; do umount -l "$i" 2>/dev/null || true; done
    left=$(mounted_under_root)
    if [ -n "$left" ]; then
      say "error: still mounted after cleanup:"; printf '  %s\n' $left; return 1
    fi
    say "unmounted everything under $ROOT (findmnt shows none)"
  }

  on_signal() {
    say "interrupted by SIG$1${PHASE:+ during phase '$PHASE'}: cleaning up"
    [ -n "$PHASE" ] && phase_end "interrupted"
    inner_cleanup || true
    exit $(( 128 + $(kill -l "$1") ))
  }
  trap 'inner_cleanup || exit 1' EXIT
  for s in TERM INT HUP; do trap "on_signal $s" "$s"; done

  # run_logged LOG CMD...: output to the terminal and appended to LOG; interruptible
  run_logged() {
    local log=$1; shift
    { "$@" 2>&1 | tee -a "$log"; exit "${PIPESTATUS[0]}"; } &
    CHILD=$!
    local rc=0
    wait "$CHILD" || rc=$?
    CHILD=
    return $rc
  }
  bind() {  # bind [mount options...] SOURCE TARGET
    local tgt=${*: -1}
    mkdir -p "$tgt"
    mount "$@"
    MOUNTS+=("$tgt")
  }
  in_root() {  # a clean root login environment
    chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  }
  fail() {  # fail PHASE-STATUS MESSAGE: end the phase, say why, exit 1
    phase_end "$1"; shift
    say "FAIL: $*"
    exit 1
  }

  # ---- debootstrap ----
  phase_begin debootstrap
  mkdir -p "$ROOT"
  say "debootstrap --variant=minbase $FD_SUITE from $FD_MIRROR (cache: $APT_CACHE; log: $LOGS/debootstrap.log)"
  if ! run_logged "$LOGS/debootstrap.log" debootstrap --variant=minbase --cache-dir="$APT_CACHE" \
      --components="$FD_COMPONENTS" "$FD_SUITE" "$ROOT" "$FD_MIRROR" >/dev/null; then
    tail -n 20 "$LOGS/debootstrap.log"
    fail failed "debootstrap failed (see $LOGS/debootstrap.log)"
  fi
  local fetched
  fetched=$(grep -c '^I: Retrieving' "$LOGS/debootstrap.log" || true)
  say "debootstrap: $(grep -c '^I: Validating' "$LOGS/debootstrap.log" || true) package(s) taken from the cache, $fetched file(s) downloaded"
  phase_end ok

  # ---- the root's configuration and mounts ----
  phase_begin setup
  cp "$FD_WORK/sources.list" "$ROOT/etc/apt/sources.list"
  rm -f "$ROOT"/etc/apt/sources.list.d/*
  [ -s "$FD_WORK/apt-proxy.conf" ] && cp "$FD_WORK/apt-proxy.conf" "$ROOT/etc/apt/apt.conf.d/01proxy"
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
  cp -L /etc/hosts "$ROOT/etc/hosts" 2>/dev/null || true
  printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"; chmod 755 "$ROOT/usr/sbin/policy-rc.d"
  echo force-unsafe-io > "$ROOT/etc/dpkg/dpkg.cfg.d/fresh-debian-unsafe-io"
  # apt makes the cache's partial/ directory its _apt user's: give the root's _apt the machine's
  # uid, so that the shared cache does not change owner
  local host_apt root_apt
  host_apt=$(id -u _apt 2>/dev/null || true)
  root_apt=$(chroot "$ROOT" id -u _apt 2>/dev/null || true)
  if [ -n "$host_apt" ] && [ -n "$root_apt" ] && [ "$host_apt" != "$root_apt" ] &&
     ! chroot "$ROOT" getent passwd "$host_apt" >/dev/null; then
    chroot "$ROOT" usermod -u "$host_apt" _apt
  fi
  rm -f "$ROOT$APT_CACHE"/*.deb  # debootstrap's copies: the cache is mounted over them
  mount -t proc proc "$ROOT/proc"; MOUNTS+=("$ROOT/proc")
  bind --rbind /sys "$ROOT/sys"
  bind --bind /dev "$ROOT/dev"
  bind --bind /dev/pts "$ROOT/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$ROOT/dev/shm"; MOUNTS+=("$ROOT/dev/shm")
  bind --bind "$APT_CACHE" "$ROOT$APT_CACHE"
  bind --bind "$FD_WORK/shardc.git" "$ROOT/srv/shardc.git"
  mount -o remount,bind,ro "$ROOT/srv/shardc.git"
  findmnt -rn -o TARGET,FSTYPE | awk -v r="$ROOT" 'index($1, r "/") == 1 {print "  mounted: " $1 " (" $2 ")"}'
  phase_end ok

  # ---- make, git, ca-certificates: the only packages added by hand ----
  phase_begin base-packages
  local before after
  before=$(ls "$APT_CACHE" | grep -c '\.deb$' || true)
  if ! run_logged "$LOGS/base-packages.log" in_root sh -c \
      'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
       apt-get install -y -qq --no-install-recommends make git ca-certificates >/dev/null'; then
    fail failed "installing make git ca-certificates failed (see $LOGS/base-packages.log)"
  fi
  phase_end ok

  # ---- clone the commit under test ----
  phase_begin clone
  if ! run_logged "$LOGS/clone.log" in_root git clone -q /srv/shardc.git /root/shardc; then
    fail failed "git clone failed"
  fi
  local head
  head=$(in_root git -C /root/shardc rev-parse HEAD)
  [ "$head" = "$FD_SHA" ] || fail failed "the clone is at $head, not $FD_SHA"
  say "cloned into /root/shardc at $head"
  phase_end ok

  # ---- the README's two commands ----
  local cmd rc
  for cmd in demo test; do
    phase_begin "make $cmd"
    rc=0
    if [ $cmd = test ]; then
      run_logged "$LOGS/make-test.log" in_root PYTEST_ADDOPTS=--junitxml=/root/pytest-report.xml \
        sh -c 'cd /root/shardc && make test' || rc=$?
    else
      run_logged "$LOGS/make-demo.log" in_root sh -c 'cd /root/shardc && make demo' || rc=$?
    fi
    if [ $rc -ne 0 ]; then
      say "last lines of make $cmd's output:"
      tail -n 25 "$LOGS/make-$cmd.log" | sed 's/^/  | /'
      local missing
      missing=$(grep -E -o "make: pkg-config cannot find .*|make: [^ ]+ is missing.*|fatal error: [^ ]+: No such file or directory|[^ :]+: command not found|No module named '[^']+'" \
                "$LOGS/make-$cmd.log" | awk '!seen[$0]++' | head -n 5 || true)
      [ -n "$missing" ] && { say "lines of the log that may name the cause:"; sed 's/^/  /' <<<"$missing"; }
      fail "failed (exit $rc)" "make $cmd failed with exit status $rc on a fresh $FD_SUITE root (log: $LOGS/make-$cmd.log)"
    fi
    phase_end ok
  done
  after=$(ls "$APT_CACHE" | grep -c '\.deb$' || true)
  say "packages downloaded into the cache during this run: $(( after - before ))"

  # ---- the exactness tests ran and did not skip ----
  phase_begin skip-check
  cp "$ROOT/root/pytest-report.xml" "$LOGS/pytest-report.xml" 2>/dev/null || true
  if ! check_skips "$LOGS/make-test.log" "$LOGS/pytest-report.xml" "$ROOT/root/shardc"; then
    fail failed "a test the README's exactness claims rest on skipped or did not run (log: $LOGS/make-test.log)"
  fi
  phase_end ok
  say "PASS: make demo and make test pass on a fresh $FD_SUITE root, and the exactness tests ran"
}

# check_skips TEST-LOG JUNIT-XML CLONE: 0 when every required test ran without skipping
check_skips() {
  local log=$1 xml=$2 clone=$3 bad=0 t block
  # end-to-end tests: scripts/run-tests.sh prints "== tests/NAME" before each and "(skipped)"
  # after one that exits 77
  for t in tests/e2e_torchvision.sh tests/e2e_pixels.sh; do
    block=$(awk -v t="== $t" '$0 == t {on=1; print; next} on && /^== |^e2e: [0-9]+ passed/ {exit} on' "$log")
    if [ -z "$block" ]; then
      say "  $t: did not run"; bad=1
    elif grep -q -E '\(skipped\)|SKIPPED' <<<"$block"; then
      say "  $t: SKIPPED: $(grep -m1 -E 'SKIPPED|skip' <<<"$block")"; bad=1
    else
      say "  $t: ran, $(grep -c '^  ok ' <<<"$block") checks passed"
    fi
  done
  # any test output that skips a comparison with Pillow or torchvision, or skips for want of a
  # module (for instance e2e_compress and e2e_damage skip their Pillow parts without Pillow)
  local lines
  lines=$(grep -n -i -E 'skip' "$log" | grep -i -E 'pillow|\bPIL\b|torchvision|no module named|could not import|not installed' || true)
  if [ -n "$lines" ]; then
    say "  skips of Pillow/torchvision checks or for a missing module in the test output:"
    sed 's/^/    /' <<<"$lines"; bad=1
  fi
  # pytest: the junit report gives each test's outcome; the torchvision files must have run
  # with no skip, and no test may skip because a module is missing
  local files
  files=$(cd "$clone/tests/python" && grep -l -E '^\s*(import|from) torchvision|importorskip\("torchvision' test_*.py || true)
  [ -n "$files" ] || { say "  tests/python: no file uses torchvision any more: update this check"; bad=1; }
  if [ ! -s "$xml" ]; then
    say "  tests/python: no pytest report: the Python tests did not run"; bad=1
  elif ! chroot "$FD_WORK/root" /usr/bin/python3 - "/root/pytest-report.xml" $files <<'PY'
import re, sys
import xml.etree.ElementTree as ET
xml, files = sys.argv[1], sys.argv[2:]
cases = ET.parse(xml).getroot().iter("testcase")
need = {f[:-3]: {"passed": 0, "bad": []} for f in files}
missing_dep = re.compile(r"torchvision|\bPIL\b|Pillow|could not import|No module named|not installed", re.I)
ok = True
others = []
for c in cases:
    cls, name = c.get("classname", ""), c.get("name", "")
    mod = cls.split(".")[0] if cls else name
    skipped = c.find("skipped")
    failed = c.find("failure") is not None or c.find("error") is not None
    what = f"{cls + '::' if cls else ''}{name}"
    if skipped is not None:
        msg = skipped.get("message", "")
        if mod in need:
            need[mod]["bad"].append(f"{what}: skipped: {msg}")
        elif missing_dep.search(msg):
            print(f"  tests/python {what}: skipped for a missing module: {msg}"); ok = False
        else:
            others.append(f"{what}: {msg}")
    elif failed:
        if mod in need:
            need[mod]["bad"].append(f"{what}: failed")
    elif mod in need:
        need[mod]["passed"] += 1
for mod, r in need.items():
    if r["bad"] or r["passed"] == 0:
        ok = False
        print(f"  tests/python/{mod}.py: {r['passed']} passed; " + ("; ".join(r["bad"]) or "no test ran"))
    else:
        print(f"  tests/python/{mod}.py: {r['passed']} passed, none skipped")
for o in others:
    print(f"  (allowed skip) tests/python {o}")
sys.exit(0 if ok else 1)
PY
  then
    bad=1
  fi
  # the other skips, for the record (not failures): whole test programs (exit 77), and what the
  # unit suites say they skipped
  local other
  other=$(awk '/^== /{t=$2} /^   \(skipped\)$/{print t}' "$log" | grep -v -x -E 'tests/e2e_torchvision.sh|tests/e2e_pixels.sh' || true)
  [ -n "$other" ] && say "  other tests skipped (allowed): $(echo $other)"
  other=$(grep -E '^test_[a-z0-9_]+: .*(skipped|SKIPPED)' "$log" | sort -u || true)
  [ -n "$other" ] && { say "  skips inside the unit suites (allowed):"; sed 's/^/    /' <<<"$other"; }
  grep -E '^(unit|e2e): [0-9]+ passed|^python: ' "$log" | sed 's/^/  /' || true
  return $bad
}

if [ "${FD_INNER:-}" = 1 ]; then
  inner_main
  exit 0
fi

# ==== outer part: checks, the machine's apt sources, the bare repository, then the inner part ====
usage() { sed -n '11,18p' "$SELF" | sed 's/^# \{0,1\}//'; }
WORKDIR= KEEP=0 REPO= MIRROR= SUITE=bookworm COMMIT=HEAD
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workdir) [ $# -ge 2 ] || die "$1 needs a directory"; WORKDIR=$2; shift 2 ;;
    --workdir=*) WORKDIR=${1#*=}; shift ;;
    -k|--keep) KEEP=1; shift ;;
    -r|--repo) [ $# -ge 2 ] || die "$1 needs a directory"; REPO=$2; shift 2 ;;
    --repo=*) REPO=${1#*=}; shift ;;
    -m|--mirror) [ $# -ge 2 ] || die "$1 needs a URL"; MIRROR=$2; shift 2 ;;
    --mirror=*) MIRROR=${1#*=}; shift ;;
    -s|--suite) [ $# -ge 2 ] || die "$1 needs a name"; SUITE=$2; shift 2 ;;
    --suite=*) SUITE=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) COMMIT=$1; shift ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mount and chroot need it)"
T_START=$(date +%s)
REPO=${REPO:-$(cd "$(dirname "$SELF")/.." && pwd)}
for c in git chroot mount umount findmnt unshare apt-get dpkg-query; do
  command -v "$c" >/dev/null || die "$c not found"
done
SHA=$(git -C "$REPO" rev-parse --verify -q "$COMMIT^{commit}") || die "$COMMIT is not a commit of $REPO"

# ---- Debian entries of the machine's apt sources: "uri suite components" ----
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # one-line format: deb [options] uri suite component...
    sed -e 's/#.*//' "$f" | awk '$1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      uri = $i; suite = $(i+1); comps = ""
      for (j = i + 2; j <= NF; j++) comps = comps (comps ? "," : "") $j
      if (uri != "" && suite != "") print uri, suite, comps }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: stanzas of Field: value lines (continuation lines start with a space)
    awk 'function flush(   nu, ns, u, s, us, ss, c) {
           if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no") {
             nu = split(uris, us, " "); ns = split(suites, ss, " ")
             c = comps; gsub(/ +/, ",", c)
             for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print us[u], ss[s], c
           }
           types = uris = suites = comps = enabled = ""; field = "" }
         /^[ \t]*#/ { next }
         /^[ \t]*$/ { flush(); next }
         /^[ \t]/ { next }
         { field = tolower($0); sub(/:.*/, "", field); v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t]+$/, "", v)
           if (field == "types") types = v; else if (field == "uris") uris = v
           else if (field == "suites") suites = v; else if (field == "components") comps = v
           else if (field == "enabled") enabled = v }
         END { flush() }' "$f"
  done
}
SOURCES=$(apt_sources | awk -v s="$SUITE" '$2 == s || $2 == s "-updates" || $2 == s "-security"' | awk '!seen[$0]++')
if [ -z "$MIRROR" ]; then
  MIRROR=$(awk -v s="$SUITE" '$2 == s {print $1; exit}' <<<"$SOURCES")
  [ -n "$MIRROR" ] || die "no '$SUITE' entry in this machine's apt sources: give one with --mirror URL"
  COMPONENTS=$(awk -v s="$SUITE" '$2 == s {print $3; exit}' <<<"$SOURCES")
else
  SOURCES=$(printf '%s %s main\n%s' "$MIRROR" "$SUITE" "$(awk -v s="$SUITE" '$2 != s' <<<"$SOURCES")")
fi
COMPONENTS=${COMPONENTS:-main}

# ---- debootstrap: installed, like every package of the project, by scripts/deps.sh ----
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap (scripts/deps.sh --ci)"
  "$(dirname "$0")/deps.sh" --ci || die "cannot install debootstrap (scripts/deps.sh --ci)"
fi
[ -d "$APT_CACHE" ] || die "$APT_CACHE: no such directory"

# ---- the work directory ----
if [ -n "$WORKDIR" ]; then
  mkdir -p "$WORKDIR"
  WORK=$(cd "$WORKDIR" && pwd)
  OWN_WORK=0
  [ -e "$WORK/root" ] && die "$WORK/root exists (a kept root?): remove it or choose another --workdir"
else
  WORK=$(mktemp -d /var/tmp/fresh-debian.XXXXXX)
  OWN_WORK=1
fi
case "$WORK" in *[[:space:]]*) die "the work directory's path must not contain spaces: $WORK" ;; esac
mkdir -p "$WORK/logs"
: > "$WORK/phases"

# ---- from here on, every exit goes through finish: the inner part stopped, no mount, cleanup ----
INNER_PID=
finish() {
  local rc=$1 s
  trap - EXIT TERM INT HUP
  # whatever still runs of the inner part (it is given time to clean up first)
  if [ -n "$INNER_PID" ] && kill -0 "$INNER_PID" 2>/dev/null; then
    for s in $(descendants "$INNER_PID" | head -n 1); do kill -TERM "$s" 2>/dev/null || true; done
    for s in $(seq 60); do kill -0 "$INNER_PID" 2>/dev/null || break; sleep 1; done
    kill -KILL "$INNER_PID" 2>/dev/null || true  # unshare --kill-child: the namespace goes with it
    wait "$INNER_PID" 2>/dev/null || true
  fi
  local total=$(( $(date +%s) - T_START )) name secs st
  say "phase timings:"
  if [ -s "$WORK/phases" ]; then
    while IFS=$'\t' read -r name secs st; do
      printf '[fresh-debian]   %-15s %8s  %s\n' "$name" "$(fmt_secs "$secs")" "$st"
    done < "$WORK/phases"
  fi
  printf '[fresh-debian]   %-15s %8s\n' total "$(fmt_secs "$total")"
  local left
  left=$(findmnt -rn -o TARGET | awk -v r="$WORK" '$0 == r || index($0, r "/") == 1')
  if [ -n "$left" ]; then
    say "error: mounted under $WORK:"; printf '  %s\n' $left; rc=1
  else
    say "no mount left under $WORK (findmnt)"
  fi
  if [ $KEEP -eq 1 ]; then
    say "kept: the root in $WORK/root (unmounted; to enter it, mount /proc, /dev yourself), logs in $WORK/logs"
  elif [ -z "$left" ]; then
    # from this namespace the root holds no mounts: removing it cannot reach into /dev or the cache
    rm -rf --one-file-system "$WORK/root" "$WORK/shardc.git"
    if [ $OWN_WORK -eq 1 ]; then rm -rf --one-file-system "$WORK"; else say "logs in $WORK/logs"; fi
  fi
  [ $rc -eq 0 ] && say "result: PASS" || say "result: FAIL (exit $rc)"
  exit "$rc"
}
on_outer_signal() { say "interrupted by SIG$1: stopping"; finish $(( 128 + $(kill -l "$1") )); }
trap 'finish 2' EXIT
for s in TERM INT HUP; do trap "on_outer_signal $s" "$s"; done


avail_gib() { df -P -k "$1" | awk 'NR == 2 {printf "%d", $4 / 1048576}'; }
say "work directory: $WORK ($(avail_gib "$WORK") GiB free); package cache: $APT_CACHE ($(avail_gib "$APT_CACHE") GiB free, $(ls "$APT_CACHE" | grep -c '\.deb$' || true) packages)"
[ "$(avail_gib "$WORK")" -ge $NEED_WORK_GIB ] || die "$WORK: less than $NEED_WORK_GIB GiB free (df)"
[ "$(avail_gib "$APT_CACHE")" -ge $NEED_CACHE_GIB ] || die "$APT_CACHE: less than $NEED_CACHE_GIB GiB free (df)"

{ while read -r uri suite comps; do
    [ -n "$uri" ] || continue
    echo "deb $uri $suite ${comps//,/ }"
  done <<<"$SOURCES"; } > "$WORK/sources.list"
apt-config dump | grep -E '^Acquire::(http|https|ftp)::Proxy' > "$WORK/apt-proxy.conf" || true
say "commit under test: $SHA ($(git -C "$REPO" log -1 --format=%s "$SHA"))"
say "mirror: $MIRROR $SUITE ($COMPONENTS); the root's apt sources:"
sed 's/^/  /' "$WORK/sources.list"

# ---- the bare repository the root clones from: exactly the commit under test ----
git init -q --bare "$WORK/shardc.git"
git -C "$WORK/shardc.git" fetch -q --no-tags \
  --upload-pack='git -c uploadpack.allowAnySHA1InWant=true upload-pack' \
  "$REPO" "$SHA:refs/heads/under-test"
git -C "$WORK/shardc.git" symbolic-ref HEAD refs/heads/under-test

# ---- the inner part, in its own mount and PID namespaces ----
export FD_INNER=1 FD_WORK="$WORK" FD_SUITE="$SUITE" FD_MIRROR="$MIRROR" FD_COMPONENTS="$COMPONENTS" FD_SHA="$SHA"
unshare --mount --propagation private --pid --fork --kill-child --mount-proc bash "$SELF" &
INNER_PID=$!
rc=0
wait "$INNER_PID" || rc=$?
INNER_PID=
finish "$rc"
