#!/usr/bin/env bash
# deps.sh: install the Debian/Ubuntu packages the project needs, once.
# Run by `make deps` (and so by `make test`; `make run` and `make data` run
# `deps.sh run`, which asks for less). As root it runs
# apt-get; otherwise it prints the exact command for you to run.
set -euo pipefail

# package -> a file that proves it is installed. `tools/deps.sh run` (make
# run, make data) asks only for what training needs: the tokenizer's Unicode
# tables and a way to fetch the data. Everything else is for the tests, the
# book and the plots.
declare -A probe=(
  [libutf8proc-dev]=/usr/include/utf8proc.h
  [curl]=/usr/bin/curl
  [ca-certificates]=/etc/ssl/certs/ca-certificates.crt
)
if [ "${1:-}" != run ]; then
  probe[libcriterion-dev]=/usr/include/criterion/criterion.h
  probe[pandoc]=/usr/bin/pandoc
  # `make plots` (tools/plots.py) runs Debian's /usr/bin/python3 with it
  probe[python3-matplotlib]=/usr/lib/python3/dist-packages/matplotlib/__init__.py
fi

# `tools/deps.sh book` adds what `make book` needs: pdflatex, KOMA-Script and
# Latin Modern (about 180 MB installed). `tools/deps.sh book-test` adds, on
# top, a headless Chromium and pdftoppm for `make book-test`.
case "${1:-}" in
  book | book-test)
    probe[texlive-latex-recommended]=/usr/share/texlive/texmf-dist/tex/latex/koma-script/scrbook.cls
    probe[lmodern]=/usr/share/texmf/tex/latex/lm/lmodern.sty
    ;;&
  book-test)
    probe[poppler-utils]=/usr/bin/pdftoppm
    browser=
    for b in chromium chromium-browser google-chrome google-chrome-stable; do
      command -v "$b" >/dev/null && browser=$b && break
    done
    [ -n "$browser" ] || probe[chromium]=/usr/bin/chromium
    ;;
esac

missing=()
for pkg in "${!probe[@]}"; do
  [ -e "${probe[$pkg]}" ] || missing+=("$pkg")
done

if ! command -v cc >/dev/null && ! command -v gcc >/dev/null; then missing+=(build-essential); fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

IFS=$'\n' missing=($(sort <<<"${missing[*]}")); unset IFS
cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "deps: missing packages: ${missing[*]}" >&2
  echo "deps: run as root:  sudo sh -c '$cmd'" >&2
  exit 1
fi

if ! command -v nvcc >/dev/null; then
  echo "deps: note: nvcc (the CUDA Toolkit) is not on PATH; the GPU parts need it." >&2
fi
