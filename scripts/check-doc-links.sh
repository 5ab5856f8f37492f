#!/usr/bin/env bash
# Checks that the docs point only at files that exist (no network, about a
# second). Reads README.md, CONTRIBUTING.md and docs/**/*.md and fails (exit
# 1, one line per broken reference) when any of these is missing:
#
#   - a record named as `results/NAME` or `docs/results/NAME` (globs `*` and
#     braces `{a,b}` allowed: at least one file must match each expansion);
#   - in docs/results/README.md's index, a line for every record folder
#     (`[`NAME/`](NAME/README.md)`), and the folder's README.md;
#     a file inside a run's archive is named `results/RUN/logs.tar.xz:FILE`,
#     and FILE must be a member of that archive;
#   - in docs/results/README.md, a record named by its full name
#     (`2026-...`) or by its end (`-s10.log.gz`, `...-explore-2r.json.gz`);
#   - the local target of a markdown link `[text](path)` or picture
#     `![alt](path)`, and its `#anchor` when the target is a markdown file
#     (anchors as GitHub makes them from the headings).
#
# Usage: scripts/check-doc-links.sh   (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import glob, os, re, sys, tarfile

def docs():
    out = [f for f in ("README.md", "CONTRIBUTING.md") if os.path.exists(f)]
    for d, _, fs in os.walk("docs"):
        out += [os.path.join(d, f) for f in sorted(fs) if f.endswith(".md")]
    return out

def expand(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    return [q for alt in m.group(1).split(",") for q in expand(p[:m.start()] + alt + p[m.end():])]

def exists(p):
    return bool(glob.glob(p)) if any(c in p for c in "*?[") else os.path.exists(p)

def slug(h):
    h = re.sub(r"<[^>]+>", "", h).strip().lower()
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)          # links keep their text
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")

_anchors = {}
def anchors(path):
    if path not in _anchors:
        seen, out, fence = {}, set(), False
        for line in open(path, encoding="utf-8"):
            if line.lstrip().startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
        for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', open(path, encoding="utf-8").read()):
            out.add(m.group(1))
        _anchors[path] = out
    return _anchors[path]

RESULT = re.compile(r"(?<![\w/.-])((?:docs/)?results/[A-Za-z0-9_.{},*?/-]*(?::[A-Za-z0-9_.{},*?/-]+)?)")

_members = {}
def members(archive):
    if archive not in _members:
        with tarfile.open(archive, "r:*") as t:
            _members[archive] = set(t.getnames())
    return _members[archive]

def exists_member(p):
    path, sep, member = p.partition(":")
    if not sep:
        return exists(p)
    return os.path.isfile(path) and path.endswith((".tar.xz", ".tgz", ".tar.gz")) and \
        any(glob.fnmatch.fnmatch(m, member) for m in members(path))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FULL = re.compile(r"`(20\d\d-\d\d-\d\d-[A-Za-z0-9_.{},*?/-]+(?::[A-Za-z0-9_.{},*?/-]+)?)`")
SHORT = re.compile(r"`(?:\.\.\.)?(-[A-Za-z0-9_{},*?-]+\.[A-Za-z0-9_.{},*]+)`")

bad, refs = [], 0
records = [os.path.relpath(os.path.join(d, f), "docs/results")
           for d, _, fs in os.walk("docs/results") for f in fs]
for doc in docs():
    here = os.path.dirname(doc)
    text = open(doc, encoding="utf-8").read()
    for no, line in enumerate(text.splitlines(), 1):
        for m in RESULT.finditer(line):
            ref = m.group(1).rstrip(".,:;")
            refs += 1
            base = ref if ref.startswith("docs/") else None
            ok = all(
                any(exists_member(os.path.join(b, e)) for b in ([""] if base else [here, "docs", "."]))
                for e in expand(ref))
            if not ok:
                bad.append(f"{doc}:{no}: {ref}")
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):    # http:, mailto:, ...
                continue
            refs += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(here, path)) if path else doc
            if not os.path.exists(full):
                bad.append(f"{doc}:{no}: link to {target} (no file {full})")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                bad.append(f"{doc}:{no}: link to {target} (no heading #{anchor} in {full})")
        if doc == os.path.join("docs", "results", "README.md"):
            for m in FULL.finditer(line):
                refs += 1
                if not all(exists_member(os.path.join("docs/results", e)) for e in expand(m.group(1))):
                    bad.append(f"{doc}:{no}: {m.group(1)}")
            for m in SHORT.finditer(line):
                refs += 1
                pats = expand(m.group(1))
                if not all(any(glob.fnmatch.fnmatch(r, "*" + p) for r in records) for p in pats):
                    bad.append(f"{doc}:{no}: {m.group(1)} (no record ends so)")

index = open(os.path.join("docs", "results", "README.md"), encoding="utf-8").read()
for d in sorted(os.listdir("docs/results")):
    if not os.path.isdir(os.path.join("docs/results", d)):
        continue
    refs += 1
    if f"[`{d}/`]({d}/README.md)" not in index:
        bad.append(f"docs/results/README.md: no index line for the record {d}/")
    if not os.path.isfile(os.path.join("docs/results", d, "README.md")):
        bad.append(f"docs/results/{d}: no README.md")

if bad:
    print(f"check-doc-links: {len(bad)} broken reference(s):")
    print("\n".join("  " + b for b in bad))
    sys.exit(1)
print(f"check-doc-links: OK, {refs} references in {len(docs())} markdown files resolve")
PY
