#!/usr/bin/env bash
# End to end: the documentation stays true to the tree.
#  1. Every source file (*.c *.h *.cu *.py *.pyi *.sh *.in *.sbatch *.awk) in a top-level folder
#     of the repository (docs/, hidden folders and what .gitignore ignores left out; the fuzzers'
#     dictionaries and regression inputs are data) is named, in backticks, in the README.md of its
#     folder, or of the nearest folder above it that has one, by its path from that README's
#     folder: compiler/python/_shardwrite.c is `python/_shardwrite.c` in compiler/README.md. And
#     every source file such a README names in backticks exists (from its folder or the root, or
#     as a bare file name anywhere).
#  2. Every relative link of README.md, docs/*.md and those READMEs leads to a file or folder that
#     exists, and a link with #anchor to a heading of that Markdown file (GitHub's anchors).
#  3. Every docs/*.md is linked from README.md, and README.md has at most 220 lines.
# Each problem is one FAIL line that names the file, the README and what to add or fix.
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

python3 - "$ROOT" > "$T/report" <<'PY'
import fnmatch, os, re, sys

root = sys.argv[1]
EXTS = ('.c', '.h', '.cu', '.py', '.pyi', '.sh', '.in', '.sbatch', '.awk')
DATA = ('tests/fuzz/dict', 'tests/fuzz/regressions', 'tests/fuzz/corpus')
MAX_README_LINES = 220
out = []
def ok(msg): out.append('ok\t' + msg)
def bad(msg): out.append('bad\t' + msg)

# ---- what .gitignore ignores: "name/" anywhere, "/path/" from the root, globs allowed ----
ignored_any, ignored_root = [], []
try:
    for line in open(os.path.join(root, '.gitignore')):
        p = line.strip()
        if not p or p.startswith('#') or p.startswith('!'):
            continue
        p = p.rstrip('/')
        if p.startswith('/'):
            ignored_root.append(p[1:])
        elif '/' in p:
            ignored_root.append(p)
        else:
            ignored_any.append(p)
except OSError:
    pass
def is_ignored(rel):
    parts = rel.split('/')
    if any(fnmatch.fnmatch(c, pat) for c in parts for pat in ignored_any):
        return True
    return any(fnmatch.fnmatch('/'.join(parts[:n]), pat)
               for pat in ignored_root for n in range(1, len(parts) + 1))

# ---- 1. every source file named in its folder's README.md ----
sources = []
for top in sorted(os.listdir(root)):
    if top.startswith('.') or top == 'docs' or not os.path.isdir(os.path.join(root, top)) \
            or is_ignored(top):
        continue
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        rdir = os.path.relpath(dirpath, root).replace(os.sep, '/')
        dirnames[:] = sorted(d for d in dirnames if not d.startswith('.')
                             and not is_ignored(rdir + '/' + d)
                             and not any((rdir + '/' + d).startswith(x) for x in DATA))
        for f in sorted(filenames):
            rel = rdir + '/' + f
            if f.endswith(EXTS) and not is_ignored(rel):
                sources.append(rel)

if not sources:
    bad('no source files found under the top-level folders')

def readme_of(rel):
    """the README.md nearest to the file, not above its top-level folder"""
    parts = rel.split('/')[:-1]
    while parts:
        cand = '/'.join(parts) + '/README.md'
        if os.path.isfile(os.path.join(root, cand)):
            return cand
        parts.pop()
    return None

texts = {}
named = {}
for rel in sources:
    readme = readme_of(rel)
    top = rel.split('/')[0]
    if readme is None:
        bad(f'{rel}: no README.md in {os.path.dirname(rel)}/ or a folder above it up to {top}/: '
            f'add {top}/README.md with a line naming `{rel[len(top) + 1:]}`')
        continue
    if readme not in texts:
        texts[readme] = open(os.path.join(root, readme), encoding='utf-8').read()
    name = rel[len(os.path.dirname(readme)) + 1:]
    if '`' + name + '`' in texts[readme]:
        named.setdefault(readme, []).append(rel)
    else:
        bad(f'{rel} is not named in {readme}: add a line "- `{name}`: what it holds"')
for readme in sorted(named):
    ok(f'{readme} names all {len(named[readme])} source files it covers')

# every source file a README names exists (a bare name may be any folder's file: `shardread.h`)
basenames = {os.path.basename(r) for r in sources}
for readme in sorted(texts):
    base = os.path.dirname(readme)
    for m in re.finditer(r'`([^`\s]+)`', texts[readme]):
        name = m.group(1)
        if not name.endswith(EXTS) or name.startswith('/') or '..' in name or '*' in name \
                or re.search(r'[A-Z]{3,}', name):  # placeholders: fuzz_NAME.c
            continue
        if not (os.path.isfile(os.path.join(root, base, name)) or os.path.isfile(os.path.join(root, name))
                or ('/' not in name and name in basenames)):
            bad(f'{readme} names `{name}`, which is not {base}/{name}, nor {name} from the root, '
                f'nor a source file\'s name anywhere: remove or rename it')

# ---- 2. relative links resolve ----
def strip_code(text):
    """the text outside fenced and indented code blocks and inline code spans, line by line"""
    lines, fenced = [], False
    for line in text.split('\n'):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            lines.append('')
            continue
        if fenced or line.startswith('    ') or line.startswith('\t'):
            lines.append('')
            continue
        lines.append(re.sub(r'`[^`]*`', '', line))
    return lines

def anchors(path):
    """GitHub's anchors of the headings of a Markdown file"""
    seen, result = {}, set()
    fenced = False
    for line in open(path, encoding='utf-8').read().split('\n'):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', m.group(1)).replace('`', '')
        slug = re.sub(r'[^\w\- ]', '', h.lower()).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f'{slug}-{n}')
    return result

docs = sorted('docs/' + f for f in os.listdir(os.path.join(root, 'docs')) if f.endswith('.md')) \
    if os.path.isdir(os.path.join(root, 'docs')) else []
md_files = ['README.md'] + docs + sorted(texts)
link_re = re.compile(r'\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
nlinks = 0
for md in md_files:
    path = os.path.join(root, md)
    if not os.path.isfile(path):
        bad(f'{md} does not exist')
        continue
    for lineno, line in enumerate(strip_code(open(path, encoding='utf-8').read()), 1):
        for m in link_re.finditer(line):
            target = m.group(1)
            if re.match(r'[a-zA-Z][a-zA-Z0-9+.-]*:', target):
                continue  # http:, https:, mailto:
            nlinks += 1
            file_part, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            shown = os.path.relpath(dest, root)
            if not os.path.exists(dest):
                bad(f'{md}:{lineno}: link ({target}): {shown} does not exist')
            elif frag and dest.endswith('.md') and frag not in anchors(dest):
                bad(f'{md}:{lineno}: link ({target}): {shown} has no heading with the anchor #{frag}')
ok(f'{nlinks} relative links in {len(md_files)} Markdown files checked')

# ---- 3. README.md short, every docs/*.md linked from it ----
readme = open(os.path.join(root, 'README.md'), encoding='utf-8').read()
n = readme.count('\n')
if n > MAX_README_LINES:
    bad(f'README.md has {n} lines, more than {MAX_README_LINES}: move the detail into docs/')
else:
    ok(f'README.md has {n} lines (at most {MAX_README_LINES})')
for d in docs:
    if '(' + d + ')' not in readme and '(' + d + '#' not in readme:
        bad(f'{d} is not linked from README.md: add it to the list of docs')
if docs:
    ok(f'{len(docs)} files in docs/')
print('\n'.join(out))
PY
rc=$?
if [ $rc -ne 0 ]; then
  bad "the documentation check ran (python3 exit $rc)"
fi
while IFS=$'\t' read -r verdict msg; do
  case "$verdict" in
    ok) ok "$msg" ;;
    bad) bad "$msg" ;;
  esac
done < "$T/report"
finish
