#!/usr/bin/env bash
# book_build.sh: build the book with pandoc (book/README.md).
#
#   tools/book_build.sh html    build/book/book.html (one self-contained file)
#   tools/book_build.sh pdf     build/book/book.pdf  (pandoc -> LaTeX -> pdflatex)
#   tools/book_build.sh check   every listing, number, table, image and link
#                               checked, nothing written (fast)
#
# The book is, in order: book/preface.md, chapters/*/README.md (sorted by
# folder name), book/appendix_*.md. BOOK_REPO_URL, when set, makes links to
# source files point at the repository's web pages.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
OUT=${BOOK_OUT:-build/book}
FILTER=book/filters/book.lua

inputs=(book/preface.md)
while IFS= read -r f; do inputs+=("$f"); done < <(ls chapters/*/README.md 2>/dev/null | LC_ALL=C sort)
while IFS= read -r f; do inputs+=("$f"); done < <(ls book/appendix_*.md 2>/dev/null | LC_ALL=C sort)

# The date and commit the book was built from, when this is a git checkout.
meta=()
if commit=$(git rev-parse --short HEAD 2>/dev/null); then
  date=$(git log -1 --format=%cd --date=format:'%B %-d, %Y')
  dirty=$(git status --porcelain 2>/dev/null | head -1)
  meta+=(-M "date=$date, commit $commit${dirty:+ (with local changes)}")
fi
[ -n "${BOOK_REPO_URL:-}" ] && meta+=(-M "book-repo-url=$BOOK_REPO_URL")

common=(--from markdown --metadata-file book/metadata.yaml "${meta[@]}" --lua-filter "$FILTER")

case "$mode" in
check)
  pandoc "${inputs[@]}" "${common[@]}" -M book-check=true -t native -o /dev/null
  # Every anchor in the sources is opened once and closed once, so that a
  # listing never silently swallows half a file.
  bad=0
  while IFS= read -r src; do
    awk -v f="$src" '
      { line = $0; sub(/^[ \t]*(\/\/|#|--|\/\*|<!--|;|%)[ \t]*/, "", line) }
      line ~ /^ANCHOR(_END)?:[ \t]*[A-Za-z0-9_.-]+[ \t]*(\*\/|-->)?[ \t]*$/ {
        kind = (line ~ /^ANCHOR_END/) ? "end" : "start"
        name = line; sub(/^ANCHOR(_END)?:[ \t]*/, "", name); sub(/[ \t]*(\*\/|-->)?[ \t]*$/, "", name)
        if (kind == "start") {
          if (name in open) { printf "%s:%d: ANCHOR: %s opened again (first at line %d)\n", f, NR, name, open[name]; bad = 1 }
          if (name in done) { printf "%s:%d: ANCHOR: %s used twice in one file\n", f, NR, name; bad = 1 }
          open[name] = NR
        } else {
          if (!(name in open)) { printf "%s:%d: ANCHOR_END: %s without its ANCHOR\n", f, NR, name; bad = 1 }
          delete open[name]; done[name] = 1
        }
      }
      END { for (n in open) { printf "%s:%d: ANCHOR: %s never closed\n", f, open[n], n; bad = 1 }; exit bad }
    ' "$src" || bad=1
  done < <(git ls-files 2>/dev/null | grep -v -e '^book/' -e '^tools/book' -e '^tests/book/' \
             | xargs -r grep -l -E 'ANCHOR(_END)?:' 2>/dev/null || true)
  [ "$bad" = 0 ] || { echo "book-check: unbalanced anchors (above)" >&2; exit 1; }
  echo "book-check: ${#inputs[@]} files, every listing, result, table, image and link checked"
  ;;
html)
  mkdir -p "$OUT"
  pandoc "${inputs[@]}" "${common[@]}" -t html5 --standalone --self-contained \
    --template book/template.html --css book/style.css --toc --toc-depth 2 \
    --highlight-style book/highlight.theme --mathml -o "$OUT/book.html"
  echo "book: wrote $OUT/book.html"
  ;;
pdf)
  mkdir -p "$OUT/tex"
  # pandoc's highlighting macros (colours of keywords, comments...), without
  # its framed-box environment: the book's code environments are in
  # book/latex/preamble.tex.
  printf '```c\nint x;\n```\n' | pandoc -s -t latex --highlight-style book/highlight.theme \
    | awk '/\\usepackage\{color\}/ {on = 1} on && /Tok\}/ {seen = 1} on && seen && !/Tok\}/ {exit} on' \
    | grep -v -e '\\usepackage{framed}' -e '{Shaded}' -e 'shadecolor' > "$OUT/tex/highlighting.tex"
  pandoc "${inputs[@]}" "${common[@]}" -t latex --standalone \
    --top-level-division chapter --number-sections --toc --toc-depth 2 \
    -V documentclass=scrbook -V classoption=oneside,open=any,numbers=noenddot \
    -V fontsize=11pt -V secnumdepth=2 \
    -V geometry=a4paper,textwidth=15.5cm,top=2.6cm,bottom=2.8cm,headheight=14pt \
    -V colorlinks=true -V linkcolor=BookLink -V urlcolor=BookLink -V toccolor=black \
    -H "$OUT/tex/highlighting.tex" -H book/latex/preamble.tex \
    -o "$OUT/tex/book.tex"
  # Up to three passes: the table of contents and the PDF outline need the
  # page numbers of the pass before.
  for pass in 1 2 3; do
    if ! pdflatex -interaction=nonstopmode -halt-on-error -file-line-error \
         -output-directory "$OUT/tex" "$OUT/tex/book.tex" > "$OUT/tex/pdflatex.out" 2>&1; then
      grep -A 12 -m 1 -E '^(!|.*:[0-9]+:)' "$OUT/tex/pdflatex.out" >&2 || tail -30 "$OUT/tex/pdflatex.out" >&2
      echo "book: pdflatex failed (pass $pass); the whole log is $OUT/tex/book.log" >&2
      exit 1
    fi
    grep -q -E 'Rerun to get|Label\(s\) may have changed|\(rerunfilecheck\)' "$OUT/tex/book.log" || [ "$pass" = 1 ] || break
  done
  cp "$OUT/tex/book.pdf" "$OUT/book.pdf"
  if grep -q 'Overfull \\hbox' "$OUT/tex/book.log"; then
    n=$(grep -c 'Overfull \\hbox' "$OUT/tex/book.log")
    echo "book: note: $n overfull lines in the PDF (grep 'Overfull' $OUT/tex/book.log)"
  fi
  echo "book: wrote $OUT/book.pdf"
  ;;
*)
  echo "usage: tools/book_build.sh html|pdf|check" >&2
  exit 2
  ;;
esac
