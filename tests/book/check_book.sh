#!/usr/bin/env bash
# check_book.sh: look at the built book as a reader would (make book-test).
#
# Expects build/book/book.html and build/book/book.pdf (make book). Checks
# that every chapter's and appendix's title is in both, that the listings
# and the figures made it, that the HTML stands alone (no file or network
# fetches), and renders pictures to look at:
#   build/book/test/html-wide.png, html-narrow.png   the HTML in headless Chromium
#   build/book/test/pdf-*.png                         PDF pages, from pdftoppm
# Exits 1, listing what is wrong, if a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.."

OUT=${BOOK_OUT:-build/book}
HTML=$OUT/book.html
PDF=$OUT/book.pdf
SHOTS=$OUT/test
fails=0
fail() { echo "check_book: FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "check_book: ok: $*"; }

for f in "$HTML" "$PDF"; do
  [ -s "$f" ] || { echo "check_book: $f is missing: run make book first"; exit 1; }
done
for tool in pdftotext pdftoppm pdfinfo; do
  command -v "$tool" >/dev/null || { echo "check_book: $tool is missing (poppler-utils; tools/deps.sh book-test)"; exit 1; }
done
browser=
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  command -v "$b" >/dev/null && browser=$b && break
done
[ -n "$browser" ] || { echo "check_book: no Chromium found (tools/deps.sh book-test)"; exit 1; }

# The book's sources, in order, as tools/book_build.sh takes them.
sources=(book/preface.md)
while IFS= read -r f; do sources+=("$f"); done < <(ls chapters/*/README.md 2>/dev/null | LC_ALL=C sort)
while IFS= read -r f; do sources+=("$f"); done < <(ls book/appendix_*.md 2>/dev/null | LC_ALL=C sort)

# Text, whitespace folded: the HTML without its tags, the PDF's text layer.
html_text=$(sed -e 's/<[^>]*>/ /g' -e 's/&amp;/\&/g; s/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&#39;/'"'"'/g' \
            -e "s/&#x27;/'/g" "$HTML" | tr -s ' \t\n' '   ')
pdf_text=$(pdftotext -enc UTF-8 "$PDF" - | tr -s ' \t\n' '   ')

# ---- every title, in both -----------------------------------------------------
for src in "${sources[@]}"; do
  # as the filter has it: without a leading "Chapter 05:" or "05 ·"
  title=$(grep -m 1 '^# ' "$src" | sed -E -e 's/^# *//' -e 's/ *\{[^}]*\} *$//' -e 's/[`*]//g' \
          -e 's/^[Cc]hapter +[0-9]+ *(:|\.|-|—|·)? *//' -e 's/^[0-9]+ *(:|\.|-) +//' -e 's/^[0-9]+ *(—|·) *//')
  if [ -z "$title" ]; then fail "$src has no '# title' line"; continue; fi
  grep -qF -- "$title" <<< "$html_text" || fail "the HTML lacks the title of $src: '$title'"
  grep -qF -- "$title" <<< "$pdf_text" || fail "the PDF lacks the title of $src: '$title'"
done
ok "${#sources[@]} titles checked in the HTML and the PDF"

# ---- listings ----------------------------------------------------------------------
listings=$(grep -ho 'include="[^"]*"' "${sources[@]}" | sort -u | sed 's/include="\(.*\)"/\1/')
n_html=$(grep -oE 'class="listing( code-fit)?"' "$HTML" | wc -l)  # code-fit: set smaller (book.lua)
n_src=$(grep -ho 'include="[^"]*"' "${sources[@]}" | wc -l)
grep -q 'class="sourceCode' "$HTML" || fail "the HTML has no highlighted code (class=\"sourceCode\")"
[ "$n_src" -gt 0 ] || fail "no listing in the book's sources (\`\`\`{.c include=...})"
[ "$n_html" -eq "$n_src" ] || fail "the HTML has $n_html listings, the sources ask for $n_src"
missing=0
while IFS= read -r path; do
  [ -z "$path" ] && continue
  grep -qF -- "$path" <<< "$pdf_text" || { fail "the PDF does not name the listed file $path"; missing=1; }
done <<< "$listings"
[ "$missing" = 0 ] && ok "$n_src listings in the HTML, their files named in the PDF"

# ---- figures -------------------------------------------------------------------------
# Markdown images, ![alt](path): each is an <img> embedded in the HTML (a
# data: URI) and a graphics file that pdflatex read.
n_img_src=$(grep -ho '!\[[^]]*\]([^)]*)' "${sources[@]}" | grep -vc '(https\?:' || true)
n_img_html=$(grep -o '<img [^>]*src="data:' "$HTML" | wc -l)
if [ "$n_img_src" -gt 0 ]; then
  [ "$n_img_html" -ge "$n_img_src" ] || fail "the HTML embeds $n_img_html images, the sources have $n_img_src"
  n_img_pdf=$(grep -o '<use [^>]*>' "$OUT/tex/book.log" 2>/dev/null | sort -u | wc -l)
  [ "$n_img_pdf" -ge 1 ] || fail "pdflatex included no figure ($OUT/tex/book.log)"
  ok "$n_img_src figures: $n_img_html in the HTML, $n_img_pdf graphics files in the PDF"
else
  ok "no figures in the sources yet"
fi

# ---- the HTML stands alone -----------------------------------------------------------
if grep -qE '<link [^>]*rel="stylesheet"[^>]*href="[^d]|<img [^>]*src="[^d]|<script [^>]*src=' "$HTML"; then
  fail "the HTML fetches files (a stylesheet, image or script not embedded)"
else
  ok "the HTML is self-contained ($(du -k "$HTML" | cut -f1) KiB)"
fi

# ---- the PDF ---------------------------------------------------------------------------
pages=$(pdfinfo "$PDF" | awk '/^Pages:/ {print $2}')
[ "${pages:-0}" -ge $(( ${#sources[@]} + 2 )) ] \
  || fail "the PDF has ${pages:-0} pages, fewer than its ${#sources[@]} parts and the front matter"
if grep -q 'There were undefined references' "$OUT/tex/book.log" 2>/dev/null; then
  fail "the PDF has undefined references ($OUT/tex/book.log)"
fi
overfull=$(grep -c 'Overfull \\hbox' "$OUT/tex/book.log" 2>/dev/null || true)
[ "${overfull:-0}" -gt 0 ] && echo "check_book: note: $overfull overfull lines in the PDF (grep Overfull $OUT/tex/book.log)"
ok "the PDF has $pages pages"

# ---- pictures ----------------------------------------------------------------------------
rm -rf "$SHOTS" && mkdir -p "$SHOTS"
shot() {  # name, width, height
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="$2,$3" --screenshot="$SHOTS/$1.png" "file://$PWD/$HTML" >/dev/null 2>&1
  local size
  size=$(stat -c %s "$SHOTS/$1.png" 2>/dev/null || echo 0)
  # A blank page compresses to a few KiB; a page of text is tens of KiB.
  if [ "$size" -gt 20000 ]; then ok "screenshot $SHOTS/$1.png ($((size / 1024)) KiB)"
  else fail "the screenshot $SHOTS/$1.png is missing or blank ($size bytes)"; fi
}
shot html-wide 1280 2000
shot html-narrow 412 1600

# The first pages (title, contents), and the first page of each chapter.
pdftoppm -png -r 60 -f 1 -l 3 "$PDF" "$SHOTS/pdf"
pdftotext -enc UTF-8 "$PDF" - \
  | awk -v RS='\f' '{ n = split($0, l, "\n"); for (i = 1; i <= n; i++)
                          if (l[i] ~ /^(Chapter [0-9]+|Appendix [A-Z])$/) { print NR; break } }' | head -20 \
  | while read -r p; do pdftoppm -png -r 60 -f "$p" -l "$p" "$PDF" "$SHOTS/pdf"; done
n_png=$(find "$SHOTS" -name 'pdf-*.png' -size +5k | wc -l)
[ "$n_png" -ge 3 ] && ok "$n_png PDF pages rendered in $SHOTS/" || fail "pdftoppm rendered $n_png pages"

if [ "$fails" -gt 0 ]; then
  echo "check_book: $fails check(s) failed"
  exit 1
fi
echo "check_book: the book looks complete; pictures to look at are in $SHOTS/"
