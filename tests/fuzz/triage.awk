# triage.awk - who is at fault for a sanitizer or libFuzzer report (run.sh replays each finding
# and pipes the output here). Prints one word:
#   ours               the first frame past the sanitizer, libFuzzer and libc frames is in our code
#                      (formats/, tests/fuzz/), or a UBSan report or broken invariant of ours, or
#                      the bad memory was allocated by our code (a library writing past our buffer
#                      is our bug: we passed the size)
#   third-party:LIB    that frame is inside shared library LIB (libhdf5, liblmdb, ...)
#   unknown            no stack to judge by (treated as ours by run.sh)
function skip(line) {
    return line ~ / in (malloc|calloc|realloc|free|posix_memalign|aligned_alloc|mem(cpy|move|set|cmp|chr)|str[a-z]*|__interceptor_[A-Za-z_0-9]*|__asan[A-Za-z_0-9:]*|__sanitizer[A-Za-z_0-9:]*|__lsan[A-Za-z_0-9:]*|__ubsan[A-Za-z_0-9:]*|fuzzer::[A-Za-z_0-9:]*|MallocHook[A-Za-z_0-9]*|abort|raise|__GI_[A-Za-z_0-9]*|__libc_[A-Za-z_0-9]*|__pthread_kill[A-Za-z_0-9]*|pthread_kill|__memcpy[A-Za-z_0-9]*|__memmove[A-Za-z_0-9]*|__memset[A-Za-z_0-9]*)[ (]/ ||
           line ~ /\(\/lib\/x86_64-linux-gnu\/libc\.so/ || line ~ /libc\.so\.6\+/ ||
           line ~ /compiler-rt|\/libclang_rt/
}
function owner(line,    m) {
    if (line ~ /\/formats\/|\/tests\/fuzz\/|formats\/[a-z_0-9]+\.c|tests\/fuzz\/[a-z_0-9]+\.c/)
        return "ours"
    if (match(line, /\/lib[A-Za-z_0-9+-]+\.so/)) {
        m = substr(line, RSTART + 1, RLENGTH - 4)
        return "third-party:" m
    }
    return "unknown"
}
/runtime error:|invariant broken/ { verdict = "ours" }
/allocated by thread|freed by thread|previously allocated by/ { in_alloc = 1; alloc_seen = 0; next }
/^    #[0-9]+ / {
    if (in_alloc) {
        if (!alloc_seen && !skip($0)) { alloc_seen = 1; if (owner($0) == "ours") alloc_ours = 1 }
        next
    }
    if (!crash_seen && !skip($0)) { crash_seen = 1; crash_owner = owner($0) }
    next
}
/^$/ { in_alloc = 0 }
END {
    if (verdict == "ours" || alloc_ours) print "ours"
    else if (crash_owner != "") print crash_owner
    else print "unknown"
}
