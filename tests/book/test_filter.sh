#!/usr/bin/env bash
# test_filter.sh: the book filter (book/filters/book.lua) on small fixtures:
# what it must accept and produce (fixtures/good.md), and every mistake it
# must refuse, naming the markdown file and what is wrong (fixtures/bad.md).
# Needs pandoc only; takes about a second. Run by `make book-test`.
set -uo pipefail
cd "$(dirname "$0")/../.."

FILTER=book/filters/book.lua
FIX=tests/book/fixtures
fails=0
fail() { echo "test_filter: FAIL: $*"; fails=$((fails + 1)); }
expect() {  # description, haystack, needle
  if grep -qF -- "$3" <<< "$2"; then echo "test_filter: ok: $1"; else fail "$1: no '$3' in the output"; fi
}
refuse() {  # description, haystack, needle
  if grep -qF -- "$3" <<< "$2"; then fail "$1: '$3' should not be there"; else echo "test_filter: ok: $1"; fi
}

# ---- what it accepts --------------------------------------------------------------
if ! out=$(pandoc "$FIX/good.md" --lua-filter "$FILTER" -t html5 2>&1); then
  fail "good.md was refused:"; echo "$out"
else
  text=$(tr '\n' ' ' <<< "$out" | sed -e 's/<[^>]*>//g')
  expect "an anchor's region is listed" "$text" "int y = x * 2;"
  refuse "anchor lines never appear in a listing" "$out" "ANCHOR"
  expect "the listing's caption names the file" "$out" "tests/book/fixtures/listing.c"
  expect "the caption names the anchor" "$text" "listing.c · inner"
  expect "a region is dedented" "$out" '<code class="sourceCode c"><span id="cb1-1"><a href="#cb1-1" aria-hidden="true" tabindex="-1"></a><span class="dt">int</span>'
  expect "an outer listing keeps the nested region's code" "$out" "static"
  refuse "the placeholder body is dropped" "$out" "a one-line placeholder"
  expect "function= takes a function" "$out" "twice"
  refuse "function= takes only that function" "$out" "printf"
  expect "a checked number keeps its text" "$out" ">44,977</span>"
  expect "a percentage is checked" "$out" ">3.9%</span>"
  expect "a kernel lab cell is found by where= in a file without min_ms" "$out" ">0.0255</span>"
  expect "and min_ms and max_ms in a file with them" "$out" ">0.0435</span>"
  expect "where= matches a quoted version with a comma" "$out" ">0.0241</span>"
  expect "a number written as a link is checked" "$out" ">164.08</span>"
  expect "results-table formats the fraction as a percentage" "$out" "8.6%"
  expect "results-table puts thousands separators in tokens/s" "$out" "99,851"
  expect "results-table names its file" "$out" "Source:"
  expect "ids get the file's prefix" "$out" 'href="#good"'
  expect "an included file's text is included" "$text" "Text of the included file"
  refuse "an included file's title is dropped" "$text" "title, dropped"
  expect "an included file's headings go one level down" "$out" '<h3 class="unnumbered" id="good-included-an-included-section"'
  expect "a link to the included file leads to its text" "$out" 'href="#good-included-tests-book-fixtures-included-md"'
  expect "an included file's links are its own folder's" "$out" 'tests/book/fixtures/listing.c"'
fi
if ! tex=$(pandoc "$FIX/good.md" --lua-filter "$FILTER" -t latex 2>&1); then
  fail "good.md was refused for LaTeX:"; echo "$tex"
else
  expect "LaTeX listings use the book's environment" "$tex" '\begin{BookCode}'
  expect "LaTeX listings have their caption" "$tex" '\BookListingCaption{'
  refuse "LaTeX needs no framed package" "$tex" "Shaded"
fi
long=$(printf '```c\nint f(int aaaaaaaaaa, int bbbbbbbbbb, int cccccccccc, int dddddddddd, int eeeeeeeeee, int ffffffffff);\n    // a comment that is much too long for one line of the narrow page and goes on\n```\n' \
       | pandoc --lua-filter "$FILTER" -M book-code-width=60 -t latex 2>&1)
widest=$(sed -n '/begin{BookCode}/,/end{BookCode}/p' <<< "$long" | grep -v 'BookCode' \
         | sed -e 's/\\[A-Za-z]*Tok{//g' -e 's/[{}]//g' -e 's/\\//g' | awk '{ if (length > m) m = length } END { print m + 0 }')
if [ "${widest:-999}" -le 61 ]; then echo "test_filter: ok: PDF code lines are wrapped ($widest <= 60 characters)"
else fail "PDF code lines are not wrapped at book-code-width (widest $widest)"; fi
expect "a wrapped comment stays a comment" "$long" '\CommentTok{// narrow page and goes on}'

wide=$(printf '```c\nint f(int aaaaaaaaaa, int bbbbbbbbbb, int cccccccccc, int dddddddddd, int eeeeeeeeee, int ffff);\n```\n' \
       | pandoc --lua-filter "$FILTER" -t html5 2>&1)
expect "HTML code wider than the column is set smaller, not clipped" "$wide" 'class="code-fit" style="--code-size: 0.717rem"'
narrow=$(printf '```c\nint f(void);\n```\n' | pandoc --lua-filter "$FILTER" -t html5 2>&1)
refuse "HTML code that fits keeps its size" "$narrow" "code-fit"

# ---- what it refuses ----------------------------------------------------------------
if err=$(pandoc "$FIX/bad.md" --lua-filter "$FILTER" -t html5 -o /dev/null 2>&1); then
  fail "bad.md was accepted"
else
  expect "errors name the markdown file" "$err" "tests/book/fixtures/bad.md:"
  expect "a missing anchor names the file and the anchor" "$err" "tests/book/fixtures/listing.c has no 'ANCHOR: nope'"
  expect "a missing source file is named" "$err" "no file tests/book/fixtures/no_such_file.c"
  expect "an unclosed anchor is refused" "$err" "'ANCHOR: unclosed' (line 20) has no ANCHOR_END"
  expect "a missing function is named" "$err" "no definition of function 'no_such_function'"
  expect "code pasted into a listing is refused" "$err" "has code in its body"
  expect "a wrong number is refused, with the cell" "$err" "'44,978' does not match"
  expect "a wrong percentage is refused" "$err" "'4.0%' does not match"
  expect "a missing row is named" "$err" "has no row labelled 'nope'"
  expect "a missing column is named" "$err" "has no column 'nope'"
  expect "a lab file from before min_ms says it has none" "$err" "lab_before.csv has no column 'min_ms'"
  expect "a table's missing row is named" "$err" "has no row labelled 'gone'"
  expect "a missing image is named" "$err" "no file tests/book/fixtures/no_such_plot.svg"
  expect "a broken link to an id is refused" "$err" "link to #nowhere"
  expect "a broken link to a file is refused" "$err" "no file tests/book/fixtures/missing.md"
fi

if [ "$fails" -gt 0 ]; then
  echo "test_filter: $fails check(s) failed"
  exit 1
fi
echo "test_filter: the filter accepts what it should and refuses what it should"
