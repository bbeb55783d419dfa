#!/usr/bin/env python3
"""Generate exercises/NN_slug/ from solutions/NN_slug/ (see exercises/README.md).

    python3 tools/make_exercises.py          write exercises/ from solutions/
    python3 tools/make_exercises.py --check  exit 1 if writing would change exercises/

Every source file of solutions/NN_slug/ (.cu .cuh .c .h) becomes the file of
the same name in exercises/NN_slug/, with these markers, each on its own line,
replaced:

    // EXERCISE BEGIN: <one-line hint>
    // EXERCISE STUB: <a line of code>          (any number, right after BEGIN)
    ... the code the reader writes ...
    // EXERCISE END

becomes a TODO comment with the hint, then the STUB lines as code: the stub
must make the unfinished piece fail loudly (kernels/exercise.h: write NaN to
the outputs), never crash, never pass.

    // EXERCISE LAUNCH-CHECK: <what, e.g. layernorm forward>

(in the host function that launches the exercise's kernel) becomes a call to
exercise_unfinished(), which names the exercise and the hint of the region
above it on stderr. A file with markers must include "exercise.h".

Other files are copied unchanged; hand-written files of exercises/ (README.md)
are left alone. Generated files start with GENERATED_LINE; one of those whose
solution no longer exists is removed (or, with --check, reported).
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
SOURCE_SUFFIXES = {".cu", ".cuh", ".c", ".h"}
GENERATED_LINE = "// GENERATED from {src} by tools/make_exercises.py."

BEGIN = re.compile(r"^(\s*)// EXERCISE BEGIN:(.*)$")
STUB = re.compile(r"^\s*// EXERCISE STUB: (.*)$")
END = re.compile(r"^\s*// EXERCISE END\s*$")
LAUNCH_CHECK = re.compile(r"^(\s*)// EXERCISE LAUNCH-CHECK:(.*)$")
ANY_MARKER = re.compile(r"//\s*EXERCISE\b")


class MarkerError(Exception):
    pass


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def generate(text, exercise, src):
    """The exercise version of one solution file's text."""
    out = [
        GENERATED_LINE.format(src=src),
        f"// Yours to write: the regions marked TODO(exercise {exercise}); what to do and",
        f"// how to test it: exercises/{exercise}/README.md.",
    ]
    lines = text.split("\n")
    hint = None  # the hint of the last region, for the LAUNCH-CHECK after it
    regions = 0
    i = 0
    while i < len(lines):
        line, where = lines[i], f"{src}:{i + 1}"
        begin, launch = BEGIN.match(line), LAUNCH_CHECK.match(line)
        if begin:
            indent, hint = begin.group(1), begin.group(2).strip()
            if not hint:
                raise MarkerError(f"{where}: EXERCISE BEGIN needs a hint after the colon")
            i += 1
            stub = []
            while i < len(lines) and STUB.match(lines[i]):
                stub.append(indent + STUB.match(lines[i]).group(1))
                i += 1
            if not stub:
                raise MarkerError(f"{where}: EXERCISE BEGIN needs EXERCISE STUB lines right "
                                  "after it (code that makes the unfinished piece fail)")
            while i < len(lines) and not END.match(lines[i]):
                if ANY_MARKER.search(lines[i]):
                    raise MarkerError(f"{src}:{i + 1}: marker inside an exercise region")
                i += 1
            if i == len(lines):
                raise MarkerError(f"{where}: EXERCISE BEGIN without EXERCISE END")
            out.append(f"{indent}// TODO(exercise {exercise}): {hint}")
            out.append(f"{indent}// Replace this stub, which makes the tests fail, with your code.")
            out.extend(stub)
            regions += 1
        elif launch:
            indent, what = launch.group(1), launch.group(2).strip()
            if hint is None or not what:
                raise MarkerError(f"{where}: EXERCISE LAUNCH-CHECK needs a description after "
                                  "the colon and an exercise region above it")
            out.append(f"{indent}// TODO(exercise {exercise}): delete this call once the code "
                       "above is written.")
            out.append(f"{indent}exercise_unfinished({c_string(exercise)}, {c_string(what)},")
            out.append(f"{indent}                    {c_string(hint)});")
        elif ANY_MARKER.search(line):
            raise MarkerError(f"{where}: unexpected exercise marker: {line.strip()}")
        else:
            out.append(line)
        i += 1
    if regions and '#include "exercise.h"' not in text:
        raise MarkerError(f'{src}: has exercise regions but does not #include "exercise.h"')
    if not regions:  # nothing to cut out: the file as it is, under the first line
        return GENERATED_LINE.format(src=src) + "\n" + text
    return "\n".join(out)


def expected_files():
    """{path under exercises/: its generated text} for every solution source."""
    files = {}
    for chapter in sorted(p for p in SOLUTIONS.iterdir() if p.is_dir()):
        for src in sorted(chapter.rglob("*")):
            if src.is_file() and src.suffix in SOURCE_SUFFIXES:
                rel = src.relative_to(SOLUTIONS)
                files[EXERCISES / rel] = generate(src.read_text(), chapter.name,
                                                  f"solutions/{rel.as_posix()}")
    return files


def stale_files(expected):
    """Generated files under exercises/ whose solution is gone."""
    prefix = GENERATED_LINE.split("{src}")[0]
    return sorted(p for p in EXERCISES.rglob("*")
                  if p.is_file() and p not in expected and p.suffix in SOURCE_SUFFIXES
                  and p.read_text(errors="replace").startswith(prefix))


def cpu_exercise_chapters():
    """The chapters whose exercise tests are CPU tests, from the table."""
    table = ROOT / "tools" / "exercise_tests.txt"
    rows = [line.split() for line in table.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return sorted(int(r[0]) for r in rows if len(r) >= 4 and r[3] == "cpu")


def spoken_ranges(numbers):
    """[2, 5, 6, 7] -> "02 and 05 to 07": how exercises/README.md lists them."""
    runs = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a:02d}" if a == b else f"{a:02d} to {b:02d}" for a, b in runs]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def readme_names_the_cpu_exercises():
    """exercises/README.md lists the CPU exercises the table has, by that phrase."""
    readme = (ROOT / "exercises" / "README.md").read_text()
    want = f"for chapters {spoken_ranges(cpu_exercise_chapters())}"
    if " ".join(readme.split()).count(want) == 0:
        print(f"make_exercises --check: exercises/README.md does not say \"{want}\" "
              "(tools/exercise_tests.txt's CPU exercises)", file=sys.stderr)
        return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if exercises/ is not what would be generated")
    args = parser.parse_args()
    try:
        expected = expected_files()
    except MarkerError as e:
        print(f"make_exercises: {e}", file=sys.stderr)
        return 2
    stale = stale_files(expected)
    differ = [p for p, text in expected.items()
              if not p.is_file() or p.read_text() != text]
    show = lambda p: p.relative_to(ROOT).as_posix()
    if args.check:
        for p in differ:
            print(f"make_exercises --check: {show(p)} is not what solutions/ generates",
                  file=sys.stderr)
        for p in stale:
            print(f"make_exercises --check: {show(p)} is generated but its solution is gone",
                  file=sys.stderr)
        readme_ok = readme_names_the_cpu_exercises()
        if differ or stale:
            print("make_exercises --check: run `python3 tools/make_exercises.py` and commit "
                  "exercises/ (if you are doing an exercise, this is expected: see "
                  "exercises/README.md)", file=sys.stderr)
            return 1
        if not readme_ok:
            return 1
        n = len(expected)
        print(f"make_exercises --check: exercises/ is up to date ({n} file{'s' * (n != 1)})")
        return 0
    for p in differ:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(expected[p])
        print(f"wrote {show(p)}")
    for p in stale:
        p.unlink()
        print(f"removed {show(p)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
