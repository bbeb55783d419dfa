-- book.lua: the book's conventions, in one pandoc Lua filter (book/README.md).
--
-- pandoc is given the book's markdown files in order (tools/book_build.sh).
-- This filter reads each of them again itself, so that every element knows
-- the file it came from: errors name that file, ids get a per-file prefix,
-- and image and link paths are resolved against the file's folder, as GitHub
-- resolves them. Then it applies the conventions:
--
--   1. listings:  ```{.c include="common/model/flops.c" anchor="flops_per_token"}
--                 ```
--      the region between "// ANCHOR: name" and "// ANCHOR_END: name" (or
--      "#" comments), dedented, other anchor lines stripped; without anchor=,
--      the whole file; function="name" takes one C/CUDA function definition.
--   2. numbers:   [44,977]{.result file="results/h100/results.csv" row="ch00" col="tok_per_s"}
--      the written number must equal the CSV cell at the written precision
--      (a trailing % shows a fraction as a percentage; scale="1000" divides).
--   3. tables:    ```{.results-table file="..." rows="ch00,ch01" cols="label,tok_per_s,mfu"}
--                 ```
--   4. figures:   ordinary images; for LaTeX an .svg is replaced by the .pdf
--      or .png beside it.
--   5. included sections:  <!-- include: ../../exercises/00_baseline/README.md -->
--      that file's text, its title dropped and its headings one level down.
--
-- Every problem is collected, and the build fails at the end listing them all.
-- Metadata read here: book-check (check both outputs' needs, write nothing),
-- book-repo-url (links to source files point there), book-code-width (PDF
-- code lines are wrapped at this many characters, default 90).

local stringify = pandoc.utils.stringify

local CHECK = false          -- book-check: run every check, whatever the output
local LATEX = FORMAT:match("latex") ~= nil
local HTML = FORMAT:match("html") ~= nil
local REPO_URL = nil
local CODE_WIDTH = 90

-- The markdown dialect of the book's files: pandoc's, with GitHub's heading
-- ids (so that README.md#a-section links work on GitHub and here alike).
local READER = "markdown+gfm_auto_identifiers+autolink_bare_uris"

local errors = {}
local function problem(file, msg) errors[#errors + 1] = file .. ": " .. msg end

-- ---- files and paths --------------------------------------------------------
local file_cache = {}
local function read_file(path)
  if file_cache[path] ~= nil then return file_cache[path] or nil end
  local f = io.open(path, "rb")
  local text = f and f:read("a")
  if f then f:close() end
  file_cache[path] = text or false
  return text
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local function normalize(path)
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      if #parts > 0 and parts[#parts] ~= ".." then table.remove(parts) else parts[#parts + 1] = ".." end
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  return table.concat(parts, "/")
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

-- A path written in a markdown file, as a path from the repository root:
-- relative to the file's folder, or to the root when it starts with "/".
local function resolve(dir, rel)
  if rel:sub(1, 1) == "/" then return normalize(rel) end
  return normalize(dir .. "/" .. rel)
end

local function has_scheme(target) return target:match("^%a[%w+.-]*:") ~= nil end

local function split_lines(text)
  local lines = {}
  text = text:gsub("\r\n", "\n")
  if text ~= "" and text:sub(-1) ~= "\n" then text = text .. "\n" end
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return lines
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- ---- 1. listings -----------------------------------------------------------
-- An anchor line: optional indent, a comment opener, ANCHOR: or ANCHOR_END:,
-- a name, an optional comment closer. Returns "start"|"end", name.
local OPENERS = { "//", "#", "--", "/*", "<!--", ";", "%" }
local function anchor_marker(line)
  local s = trim(line)
  local body
  for _, o in ipairs(OPENERS) do
    if s:sub(1, #o) == o then body = trim(s:sub(#o + 1)) break end
  end
  if not body then return nil end
  body = trim((body:gsub("%*/$", ""):gsub("%-%->$", "")))
  local kind, name = body:match("^(ANCHOR_END):%s*([%w_.%-]+)$")
  if not kind then kind, name = body:match("^(ANCHOR):%s*([%w_.%-]+)$") end
  if not kind then return nil end
  return kind == "ANCHOR" and "start" or "end", name
end

-- The lines of the region `anchor` (every line when anchor is nil), anchor
-- lines of any name left out. Returns lines, or nil and what is wrong.
local function anchor_region(lines, anchor)
  local out, inside, start_line, seen_end = {}, anchor == nil, nil, false
  for i, line in ipairs(lines) do
    local kind, name = anchor_marker(line)
    if kind then
      if anchor and name == anchor then
        if kind == "start" then
          if start_line then
            return nil, string.format("'ANCHOR: %s' appears twice (lines %d and %d)", anchor, start_line, i)
          end
          start_line, inside = i, true
        else
          if not inside then
            return nil, string.format("'ANCHOR_END: %s' (line %d) has no ANCHOR before it", anchor, i)
          end
          inside, seen_end = false, true
        end
      end
    elseif inside then
      out[#out + 1] = line
    end
  end
  if anchor and not start_line then return nil, "has no 'ANCHOR: " .. anchor .. "'" end
  if anchor and not seen_end then
    return nil, string.format("'ANCHOR: %s' (line %d) has no ANCHOR_END", anchor, start_line)
  end
  return out
end

-- The definition of C/CUDA function `name`: from its first line, which starts
-- at column 0 and names it (prototypes, which end in ';', are skipped), to the
-- closing brace at column 0 (or the same line, for a one-line function).
local function function_region(lines, name)
  local pat = "%f[%w_]" .. name:gsub("%p", "%%%0") .. "%f[^%w_]"
  local found, brace_line
  for i, line in ipairs(lines) do
    if line:match("^[%a_]") and line:match(pat) and not anchor_marker(line) then
      for j = i, math.min(#lines, i + 15) do
        if lines[j]:find("{", 1, true) then
          if found then
            return nil, string.format("function '%s' is defined twice (lines %d and %d)", name, found, i)
          end
          found, brace_line = i, j
          break
        end
        if lines[j]:match(";%s*$") then break end
      end
    end
  end
  if not found then return nil, "has no definition of function '" .. name .. "'" end
  local _, opens = lines[brace_line]:gsub("{", "")
  local _, closes = lines[brace_line]:gsub("}", "")
  local last
  if opens == closes then
    last = brace_line
  else
    for k = brace_line + 1, #lines do
      if lines[k]:match("^}") then last = k break end
    end
  end
  if not last then return nil, "function '" .. name .. "' has no closing '}' at column 0" end
  local out = {}
  for k = found, last do
    if not anchor_marker(lines[k]) then out[#out + 1] = lines[k] end
  end
  return out
end

local function expand_tabs(line)
  if not line:find("\t", 1, true) then return line end
  local out = {}
  local col = 0
  for ch in line:gmatch(".") do
    if ch == "\t" then
      local n = 4 - col % 4
      out[#out + 1] = string.rep(" ", n)
      col = col + n
    else
      out[#out + 1] = ch
      col = col + 1
    end
  end
  return table.concat(out)
end

-- Tabs expanded, common indentation removed, blank lines trimmed at both ends.
local function tidy(lines)
  local out = {}
  for i, l in ipairs(lines) do out[i] = expand_tabs(l):gsub("%s+$", "") end
  while #out > 0 and out[1] == "" do table.remove(out, 1) end
  while #out > 0 and out[#out] == "" do table.remove(out) end
  local indent
  for _, l in ipairs(out) do
    if l ~= "" then
      local n = #l:match("^ *")
      if not indent or n < indent then indent = n end
    end
  end
  if indent and indent > 0 then
    for i, l in ipairs(out) do out[i] = l:sub(indent + 1) end
  end
  return out
end

-- HTML: the text column fits about 86 columns of code at the normal size
-- (.8rem, a little less inside a list). A block with longer lines is set
-- smaller, just enough to show them whole (down to .64rem, about 107
-- columns); only longer lines than that scroll. Returns the Div's style.
local HTML_CODE_COLUMNS, HTML_CODE_SIZE, HTML_CODE_MIN = 86, 0.8, 0.64
local function html_fit_style(text)
  local widest = 0
  for _, line in ipairs(split_lines(text)) do
    local line_x = expand_tabs(line)
    local n = utf8.len(line_x) or #line_x
    if n > widest then widest = n end
  end
  if widest <= HTML_CODE_COLUMNS then return nil end
  local size = math.max(HTML_CODE_MIN, HTML_CODE_SIZE * HTML_CODE_COLUMNS / widest)
  return string.format("--code-size: %.3frem", size)
end

-- ---- code for the PDF: wrapped lines, LaTeX --------------------------------
local C_LIKE = { c = true, cpp = true, cuda = true, cu = true, h = true, java = true, javascript = true }
local HASH_LIKE = { bash = true, sh = true, shell = true, python = true, makefile = true, make = true,
                    yaml = true, toml = true }
local BACKSLASH_CONT = { bash = true, sh = true, shell = true, makefile = true, make = true }

local function utf8_chars(s)
  local chars = {}
  local ok = pcall(function()
    for _, c in utf8.codes(s) do chars[#chars + 1] = utf8.char(c) end
  end)
  if not ok then
    chars = {}
    for ch in s:gmatch(".") do chars[#chars + 1] = ch end
  end
  return chars
end

-- Breaks one line into lines of at most `width` characters, at spaces outside
-- string literals where it can. A broken comment continues as a comment; a
-- broken shell line ends in a backslash; other code continues indented.
local function wrap_line(line, width, lang, out, base_indent)
  local chars = utf8_chars(line)
  if #chars <= width then out[#out + 1] = line return end
  local indent = 0
  while chars[indent + 1] == " " do indent = indent + 1 end
  local base = base_indent or indent  -- the original line's indentation
  local leader = C_LIKE[lang] and "//" or (HASH_LIKE[lang] and "#") or nil
  local breaks, comment_at = {}, nil
  local i, quote = 1, nil
  while i <= #chars do
    local c = chars[i]
    if comment_at then
      if c == " " then breaks[i] = true end
    elseif quote then
      if c == "\\" then i = i + 1 elseif c == quote then quote = nil end
    elseif c == '"' or (c == "'" and lang ~= "text") then
      quote = c
    elseif leader and table.concat(chars, "", i, math.min(#chars, i + #leader - 1)) == leader
        and (leader ~= "#" or i == indent + 1 or chars[i - 1] == " ") then
      comment_at = i
    elseif c == " " then
      breaks[i] = true
    end
    i = i + 1
  end
  local limit = width
  if BACKSLASH_CONT[lang] then limit = width - 2 end
  -- The break: the last space that fits, but not one that would leave a
  -- scrap of a few characters for the next line, and after a comma if one
  -- is near the end of the line.
  local at, plain, fallback
  for k = math.min(limit + 1, #chars), indent + 9, -1 do
    if breaks[k] then
      fallback = fallback or k
      if #chars - k >= 12 then
        plain = plain or k
        if chars[k - 1] == "," and not (comment_at and k > comment_at) then at = k break end
        if k < limit - 24 then break end
      end
    end
  end
  at = at or plain or fallback
  local first, rest_start, prefix
  if at then
    first = table.concat(chars, "", 1, at - 1):gsub("%s+$", "")
    rest_start = at + 1
  else
    first = table.concat(chars, "", 1, limit)
    rest_start = limit + 1
  end
  local in_comment = comment_at and (at or limit + 1) > comment_at
  if in_comment then
    local col = (comment_at == indent + 1) and indent or base + 4
    prefix = string.rep(" ", col) .. leader .. " "
  else
    prefix = string.rep(" ", base + 4)
    if BACKSLASH_CONT[lang] and at then first = first .. " \\" end
  end
  local rest = table.concat(chars, "", rest_start):gsub("^%s+", "")
  out[#out + 1] = first
  if rest ~= "" then wrap_line(prefix .. rest, width, lang, out, base) end
end

local function wrap_code(text, width, lang)
  local out = {}
  for _, line in ipairs(split_lines(text)) do wrap_line(expand_tabs(line), width, lang, out) end
  return table.concat(out, "\n")
end

local function code_lang(classes)
  for _, c in ipairs(classes) do
    if c ~= "listing" and c ~= "numberLines" then return c end
  end
  return nil
end

-- A code block as LaTeX: pandoc's own highlighting macros, in the book's
-- environments (book/latex/preamble.tex), with long lines wrapped first.
local function latex_code_block(text, classes)
  local lang = code_lang(classes)
  local wrapped = wrap_code(text, CODE_WIDTH, lang or "text")
  local tex = pandoc.write(pandoc.Pandoc({ pandoc.CodeBlock(wrapped, pandoc.Attr("", classes)) }), "latex")
  if tex:find("\\begin{Highlighting}", 1, true) then
    tex = tex:gsub("\\begin{Shaded}%s*", ""):gsub("%s*\\end{Shaded}", "")
    tex = tex:gsub("\\begin{Highlighting}%[%]", "\\begin{BookCode}"):gsub("\\end{Highlighting}", "\\end{BookCode}")
    -- pandoc writes a caret as \^{}, the circumflex accent, raised and small,
    -- as Latin Modern Mono's own caret is: code gets an ASCII caret.
    tex = tex:gsub("\\%^{}", "\\BookCaret{}")
  else
    local esc = { ["\\"] = "\\textbackslash{}", ["{"] = "\\{", ["}"] = "\\}", ["^"] = "\\BookCaret{}" }
    tex = "\\begin{BookPlain}\n" .. wrapped:gsub("[\\{}^]", esc) .. "\n\\end{BookPlain}"
  end
  return pandoc.RawBlock("latex", tex)
end

-- ---- 2 and 3. results ------------------------------------------------------
local csv_cache = {}

local function parse_csv_line(line)
  local fields, field, i, quoted = {}, {}, 1, false
  while i <= #line do
    local c = line:sub(i, i)
    if quoted then
      if c == '"' and line:sub(i + 1, i + 1) == '"' then field[#field + 1] = '"' i = i + 1
      elseif c == '"' then quoted = false
      else field[#field + 1] = c end
    elseif c == '"' then quoted = true
    elseif c == "," then fields[#fields + 1] = table.concat(field) field = {}
    else field[#field + 1] = c end
    i = i + 1
  end
  fields[#fields + 1] = table.concat(field)
  return fields
end

-- { header = {...}, col = {name -> index}, rows = {...}, row = {label -> row} }
local function load_csv(path)
  if csv_cache[path] ~= nil then return csv_cache[path] or nil end
  local text = read_file(path)
  if not text then csv_cache[path] = false return nil end
  local t = { header = {}, col = {}, rows = {}, row = {} }
  for _, line in ipairs(split_lines(text)) do
    if line ~= "" then
      local f = parse_csv_line(line)
      if #t.header == 0 then
        t.header = f
        for k, name in ipairs(f) do t.col[name] = k end
      else
        t.rows[#t.rows + 1] = f
        local label = f[t.col.label or 1]
        if label and t.row[label] == nil then t.row[label] = f end
      end
    end
  end
  csv_cache[path] = t
  return t
end

-- "gpu: NVIDIA H100 80GB HBM3" lines of the environment.txt beside a CSV.
local function load_environment(csv_path)
  local text = read_file(dirname(csv_path) .. "/environment.txt")
  if not text then return nil end
  local env = {}
  for _, line in ipairs(split_lines(text)) do
    local k, v = line:match("^([%w_]+):%s*(.-)%s*$")
    if k then env[k] = v end
  end
  return env
end

-- The `make bench` session of each row of a results.csv: 1 for the run that
-- wrote it, k + 1 for the k-th "appended: DATE, commit C: chapters N M ..."
-- line of its environment.txt (tools/bench.sh, APPEND=1). An appended
-- session's rows follow the others, from the first row of a chapter it
-- names (tools/plots.py reads them the same way). Returns {label -> k} and
-- the sessions, { {date =, commit =}, ... }, or nil without appended lines.
local function load_sessions(csv_path)
  local text = read_file(dirname(csv_path) .. "/environment.txt")
  local t = load_csv(csv_path)
  if not text or not t then return nil end
  local env = load_environment(csv_path) or {}
  local sessions = { { date = env.date, commit = env.commit } }
  local appended = {}
  for _, line in ipairs(split_lines(text)) do
    local date, commit, chapters = line:match("^appended:%s*(%S+), commit (%w+): chapters ([%d ]+)")
    if date then
      sessions[#sessions + 1] = { date = date, commit = commit }
      local set = {}
      for n in chapters:gmatch("%d+") do set[tonumber(n)] = true end
      appended[#appended + 1] = set
    end
  end
  if #appended == 0 then return nil end
  local of, current = {}, 1
  for _, r in ipairs(t.rows) do
    local label = r[t.col.label or 1] or ""
    local n = label:match("^ch(%d%d)")
    if n and appended[current] and appended[current][tonumber(n)] then current = current + 1 end
    of[label] = current
  end
  return of, sessions
end

local function thousands(digits)
  local sign, int, frac = digits:match("^([-+]?)(%d+)(.*)$")
  if not int then return digits end
  int = int:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
  return sign .. int .. frac
end

-- The cell (row label, column name) of the CSV at path, as a string, or nil
-- and what is wrong.
local function csv_cell(path, row, col)
  local t = load_csv(path)
  if not t then return nil, "no file " .. path end
  if not t.col[col] then
    return nil, string.format("%s has no column '%s' (it has %s)", path, col, table.concat(t.header, ", "))
  end
  local r = t.row[row]
  if not r then return nil, string.format("%s has no row labelled '%s'", path, row) end
  local v = r[t.col[col]]
  if v == nil or v == "" then return nil, string.format("%s, row %s, column %s is empty", path, row, col) end
  return v
end

-- A CSV without a label column (the kernel lab's kernels.csv) names a row by
-- the values of some of its columns: where="family=layernorm_backward;
-- version=v2 vec16; precision=bf16". Exactly one row must match. Returns the
-- row's key for messages and the row, or nil and what is wrong.
local function csv_row_where(path, where)
  local t = load_csv(path)
  if not t then return nil, nil, "no file " .. path end
  local conds = {}
  for item in where:gmatch("[^;]+") do
    local k, v = item:match("^%s*([^=]-)%s*=%s*(.-)%s*$")
    if not k or k == "" then return nil, nil, "where='" .. where .. "': write column=value; column=value" end
    if not t.col[k] then
      return nil, nil, string.format("%s has no column '%s' (it has %s)", path, k, table.concat(t.header, ", "))
    end
    conds[#conds + 1] = { k, v }
  end
  local found, n = nil, 0
  for _, r in ipairs(t.rows) do
    local ok = true
    for _, c in ipairs(conds) do
      if r[t.col[c[1]]] ~= c[2] then ok = false break end
    end
    if ok then found, n = found or r, n + 1 end
  end
  if n ~= 1 then
    return nil, nil, string.format("%s: %d rows match where='%s' (it must name exactly one)", path, n, where)
  end
  return "where " .. where, found
end

-- The cell of a row found by where=, as a string, or nil and what is wrong.
local function csv_cell_where(path, where, col)
  local key, r, why = csv_row_where(path, where)
  if not r then return nil, why end
  local t = load_csv(path)
  if not t.col[col] then
    return nil, string.format("%s has no column '%s' (it has %s)", path, col, table.concat(t.header, ", "))
  end
  local v = r[t.col[col]]
  if v == nil or v == "" then return nil, string.format("%s, %s, column %s is empty", path, key, col) end
  return v
end

-- Checks a number written in the text against its cell. Returns nil when it
-- matches, else what is wrong. row is a label, or { where = "..." }.
local function check_result(written, path, row, col, scale)
  local cell, why
  if type(row) == "table" then
    cell, why = csv_cell_where(path, row.where, col)
    row = "where " .. row.where
  else
    cell, why = csv_cell(path, row, col)
  end
  if not cell then return why end
  local w = trim(written)
  local pct = w:sub(-1) == "%"
  if pct then w = trim(w:sub(1, -2)) end
  local plain = w:gsub(",", "")
  if not plain:match("^[-+]?%d+%.?%d*$") and not plain:match("^[-+]?%.%d+$") then
    return string.format("'%s' is not a number (write digits, commas, a point, an optional %%)", written)
  end
  local value = tonumber(cell)
  if not value then return string.format("%s, row %s, column %s is '%s', not a number", path, row, col, cell) end
  if pct then value = value * 100 end
  if scale then value = value / scale end
  local decimals = #(plain:match("%.(%d*)$") or "")
  local expected = string.format("%." .. decimals .. "f", value)
  local given = plain:gsub("^%+", "")
  -- within half a unit of the last written digit (either way at a tie:
  -- 0.7035 may be written 70.3% or 70.4%)
  local half = 0.5 * 10 ^ (-decimals)
  if math.abs(tonumber(given) - value) <= half * (1 + 1e-9) then return nil end
  local shown = thousands(expected) .. (pct and "%" or "")
  return string.format("'%s' does not match %s, row %s, column %s = %s%s: at the written precision it reads %s",
    written, path, row, col, cell, scale and (" (/" .. scale .. ")") or "", shown)
end

local COLUMN_TITLES = {
  label = "run", chapter = "chapter", B = "B", T = "T", steps = "steps",
  ms_per_step = "ms/step", tok_per_s = "tokens/s", tflops = "TFLOP/s", mfu = "MFU",
  peak_mem_gib = "peak memory (GiB)", data_ms = "data (ms)", forward_ms = "forward (ms)",
  backward_ms = "backward (ms)", optimizer_ms = "optimizer (ms)",
}

-- A column without a title above: its name, a little friendlier.
local function column_title(col)
  if COLUMN_TITLES[col] then return COLUMN_TITLES[col] end
  local t = col:gsub("_tflops$", " TFLOP/s"):gsub("_of_peak$", " of peak"):gsub("_ms$", " (ms)")
  t = t:gsub("_gib$", " (GiB)"):gsub("_per_s$", "/s"):gsub("_", " ")
  return t
end

-- Fractions shown as percentages: mfu, *_of_peak, and the percent= columns.
local function is_percent(col, extra)
  return col == "mfu" or col:match("_of_peak$") ~= nil or (extra and extra[col]) or false
end

local function format_cell(col, v, percent)
  if v == nil or v == "" then return "" end
  local n = tonumber(v)
  if not n then return v end
  if percent then return string.format("%.1f%%", n * 100) end
  if col == "tok_per_s" then return thousands(string.format("%.0f", n)) end
  return v
end

local function split_list(s)
  local out = {}
  for item in (s or ""):gmatch("[^,]+") do
    item = trim(item)
    if item ~= "" then out[#out + 1] = item end
  end
  return out
end

-- ---- LaTeX bits -------------------------------------------------------------
local function latex_inlines(inlines)
  return trim(pandoc.write(pandoc.Pandoc({ pandoc.Plain(inlines) }), "latex"))
end

local TT_ESCAPES = {
  ["\\"] = "\\textbackslash{}", ["{"] = "\\{", ["}"] = "\\}", ["$"] = "\\$", ["&"] = "\\&",
  ["#"] = "\\#", ["_"] = "\\_", ["%"] = "\\%", ["^"] = "\\BookCaret{}", ["~"] = "\\textasciitilde{}",
  ["'"] = "\\textquotesingle{}", ["`"] = "\\textasciigrave{}", ["-"] = "-{}", ["<"] = "\\textless{}",
  [">"] = "\\textgreater{}",
}
-- Inline code for LaTeX, breakable after / _ . , ( = so long paths and
-- calls do not run into the margin.
local function latex_inline_code(text)
  local out = {}
  for _, ch in ipairs(utf8_chars(text)) do
    out[#out + 1] = TT_ESCAPES[ch] or ch
    if ch == "/" or ch == "_" or ch == "." or ch == "," or ch == "(" or ch == "=" then
      out[#out + 1] = "\\allowbreak{}"
    end
  end
  return pandoc.RawInline("latex", "\\texttt{" .. table.concat(out) .. "}")
end

-- ---- the book's files -------------------------------------------------------
-- What a file is, from its path.
local function classify(path)
  local nn = path:match("^chapters/(%d+)_[^/]*/README%.md$")
  if nn then return { kind = "chapter", number = tonumber(nn), prefix = "ch" .. nn } end
  local letter = path:match("^book/appendix_(%a)[^/]*%.md$")
  if letter then
    return { kind = "appendix", letter = letter:upper(), prefix = "appendix-" .. letter:lower() }
  end
  local base = path:match("([^/]+)%.md$") or path
  base = base:lower():gsub("[^%w]+", "-")
  return { kind = "front", prefix = base }
end

-- Chapter titles may carry their number for GitHub ("Chapter 0: ...",
-- "00 - ..."); the book numbers chapters itself, so it is dropped.
local TITLE_PREFIXES = {
  "^[Cc]hapter%s+%d+%s*[:.%-]%s*", "^[Cc]hapter%s+%d+%s*—%s*", "^[Cc]hapter%s+%d+%s*·%s*",
  "^[Cc]hapter%s+%d+%s+", "^%d+%s*[:.%-]%s+", "^%d+%s*—%s*", "^%d+%s*·%s*",
}
local function strip_title_number(inlines)
  local s = stringify(inlines)
  local prefix
  for _, p in ipairs(TITLE_PREFIXES) do
    prefix = s:match(p)
    if prefix then break end
  end
  if not prefix or #prefix == #s then return inlines end
  local out, consumed = {}, 0
  for _, el in ipairs(inlines) do
    local t = (el.t == "Space" or el.t == "SoftBreak") and " " or stringify(el)
    if consumed >= #prefix then
      out[#out + 1] = el
    elseif consumed + #t <= #prefix then
      consumed = consumed + #t
    elseif el.t == "Str" then
      out[#out + 1] = pandoc.Str(el.text:sub(#prefix - consumed + 1))
      consumed = #prefix
    else
      out[#out + 1] = el
      consumed = #prefix
    end
  end
  return out
end

-- ---- per-file processing ----------------------------------------------------
local files = {}      -- in book order: { path, dir, info, doc, ids = {old -> new} }
local by_path = {}
local global_ids = {} -- old id -> list of new ids, for bare #id links across files
local included = {}   -- path of an included file -> { file = the book file, id = its Div's id }

-- 5. Included sections. A paragraph-level HTML comment
--      <!-- include: ../../exercises/00_baseline/README.md -->
-- (the path relative to the markdown file, as GitHub links are; GitHub shows
-- nothing) is replaced by that file's text: its title (the first level-1
-- heading) dropped, its other headings one level deeper, their ids prefixed
-- with "included-" so that they cannot clash with the including file's, and
-- its relative links and images made relative to the repository root. The
-- blocks are wrapped in a Div, and a link to the included file anywhere in
-- the book leads there.
local function expand_includes(f)
  local out = {}
  for _, b in ipairs(f.doc.blocks) do
    local rel = b.t == "RawBlock" and b.format:match("html")
                and b.text:match("^%s*<!%-%-%s*include:%s*(%S+)%s*%-%->%s*$")
    if not rel then
      out[#out + 1] = b
    else
      local p = resolve(f.dir, rel)
      local text = read_file(p)
      if not text then
        problem(f.path, "include: no file " .. p .. " (the path is relative to the markdown file)")
      else
        local dir = dirname(p)
        local doc = pandoc.read(text, READER)
        local title_dropped = false
        local blocks = {}
        for _, ib in ipairs(doc.blocks) do
          if ib.t == "Header" and ib.level == 1 and not title_dropped then
            title_dropped = true
          else
            blocks[#blocks + 1] = ib
          end
        end
        local function rebase(target)
          if has_scheme(target) or target:sub(1, 1) == "#" or target:sub(1, 1) == "/" then
            return target
          end
          local path, frag = target:match("^([^#]*)#?(.*)$")
          return "/" .. resolve(dir, path) .. (frag ~= "" and ("#" .. frag) or "")
        end
        blocks = pandoc.walk_block(pandoc.Div(blocks), {
          Header = function(h)
            h.level = h.level + 1
            if h.identifier ~= "" then h.identifier = "included-" .. h.identifier end
            return h
          end,
          Link = function(l)
            if l.target:sub(1, 1) == "#" then l.target = "#included-" .. l.target:sub(2)
            else l.target = rebase(l.target) end
            return l
          end,
          Image = function(img) img.src = rebase(img.src) return img end,
        }).content
        local id = "included-" .. p:gsub("[^%w]+", "-"):lower()
        included[p] = { file = f, id = id }
        out[#out + 1] = pandoc.Div(blocks, pandoc.Attr(id, { "included" }, { { "source", p } }))
      end
    end
  end
  f.doc.blocks = out
end

-- An image alone in its paragraph is a figure (pandoc marks its title
-- "fig:"). Its number: the chapter's or appendix's, then n; nil for a
-- paragraph that is not a figure, or one outside chapters and appendices.
local function is_figure(p)
  return #p.content == 1 and p.content[1].t == "Image" and (p.content[1].title or ""):match("^fig:") ~= nil
end
function figure_label(f, p, n)
  if not is_figure(p) then return nil end
  if f.info.kind == "chapter" then return tostring(f.info.number) .. "." .. n end
  if f.info.kind == "appendix" then return f.info.letter .. "." .. n end
  return nil
end
function figure_id(label) return "figure-" .. label:lower():gsub("%.", "-") end

local function collect_ids(f)
  f.ids, f.title_id = {}, nil
  local level1 = 0
  local function note(old, new)
    if old == "" then return end
    f.ids[old] = new
    global_ids[old] = global_ids[old] or {}
    table.insert(global_ids[old], new)
  end
  pandoc.walk_block(pandoc.Div(f.doc.blocks), {
    Header = function(h)
      if h.level == 1 then
        level1 = level1 + 1
        if level1 == 1 then
          f.title_id = h.identifier
          note(h.identifier, f.info.prefix)
          return nil
        end
      end
      note(h.identifier, f.info.prefix .. "-" .. h.identifier)
    end,
    Div = function(d) note(d.identifier, f.info.prefix .. "-" .. d.identifier) end,
    Span = function(s) note(s.identifier, f.info.prefix .. "-" .. s.identifier) end,
  })
  -- Figures, numbered in each chapter (4.1, 4.2...) or appendix (A.1): their
  -- ids, figure-4-1, are the same in every file, for [Figure 4.1](#figure-4-1).
  f.figures = 0
  pandoc.walk_block(pandoc.Div(f.doc.blocks), {
    Para = function(p)
      local label = figure_label(f, p, f.figures + 1)
      if label then
        f.figures = f.figures + 1
        local id = figure_id(label)
        note(id, id)
      end
    end,
  })
  f.level1 = level1
  if f.info.kind ~= "front" and level1 == 0 then
    problem(f.path, "has no level-1 heading ('# Title'): a chapter or appendix starts with its title")
  elseif f.info.kind ~= "front" and level1 > 1 then
    problem(f.path, "has " .. level1 .. " level-1 headings; only the title is '#', sections are '##'")
  end
end

local function transform(f)
  local info = f.info
  local counters = { 0, 0, 0 }
  local first_h1_done = false

  local function new_id(old)
    if old == "" then return "" end
    return f.ids[old] or (info.prefix .. "-" .. old)
  end

  local function number_label(level)
    if info.kind == "chapter" then
      if level == 1 then return tostring(info.number) end
      return tostring(info.number) .. "." .. table.concat(counters, ".", 2, level)
    elseif info.kind == "appendix" then
      if level == 1 then return info.letter end
      return info.letter .. "." .. table.concat(counters, ".", 2, level)
    end
    return nil
  end

  local function Header(h)
    local is_title = h.level == 1 and not first_h1_done
    if h.level == 1 then first_h1_done = true end
    h.identifier = new_id(h.identifier)
    if is_title and info.kind == "chapter" then h.content = strip_title_number(h.content) end
    if is_title then info.title = stringify(h.content) end
    local unnumbered = h.classes:includes("unnumbered") or h.classes:includes("-")
    if info.kind == "front" then
      if not unnumbered then h.classes:insert("unnumbered") end
      return h
    end
    if unnumbered or h.level > 3 then return h end
    if h.level >= 2 then
      counters[h.level] = counters[h.level] + 1
      for k = h.level + 1, 3 do counters[k] = 0 end
    end
    if HTML then
      local label = number_label(h.level)
      if label then
        local content = { pandoc.Span({ pandoc.Str(label) }, pandoc.Attr("", { "header-section-number" })), pandoc.Space() }
        for _, el in ipairs(h.content) do content[#content + 1] = el end
        h.content = content
        h.classes:insert("numbered")
      end
    end
    if h.level == 1 then h.classes:insert(info.kind) end
    return h
  end

  local function listing(cb)
    local a = cb.attributes
    local src = a.include
    local body = trim(cb.text)
    if body ~= "" and (body:find("\n", 1, true)) then
      problem(f.path, string.format("the listing of %s has code in its body: listings come from the source, "
        .. "leave the body empty", src))
    end
    local text = read_file(src)
    if not text then
      problem(f.path, string.format("listing: no file %s (include= paths are relative to the repository root)", src))
      return pandoc.Null()
    end
    local lines, why
    if a.anchor and a["function"] then
      problem(f.path, "listing of " .. src .. ": give anchor= or function=, not both")
      return pandoc.Null()
    elseif a["function"] then
      lines, why = function_region(split_lines(text), a["function"])
    else
      lines, why = anchor_region(split_lines(text), a.anchor)
    end
    if not lines then
      problem(f.path, string.format("listing: %s %s", src, why))
      return pandoc.Null()
    end
    lines = tidy(lines)
    if #lines == 0 then
      problem(f.path, string.format("listing: %s%s is empty", src, a.anchor and (", anchor " .. a.anchor) or ""))
    end
    local code = table.concat(lines, "\n")
    local classes = {}
    for _, c in ipairs(cb.classes) do
      if c == "cuda" or c == "cu" then c = "cpp" end
      classes[#classes + 1] = c
    end
    -- the caption: the file, and the anchor or function
    local cap = { pandoc.Code(src) }
    local what = a.anchor or a["function"]
    if what then
      cap[#cap + 1] = pandoc.Str(" · ")
      cap[#cap + 1] = pandoc.Span({ pandoc.Str(what) }, pandoc.Attr("", { "listing-anchor" }))
    end
    if LATEX then
      return {
        pandoc.RawBlock("latex", "\\BookListingCaption{" .. latex_inlines({ pandoc.Code(src) }) .. "}{"
          .. (what and latex_inlines({ pandoc.Str(what) }) or "") .. "}"),
        latex_code_block(code, classes),
      }
    end
    local fit = html_fit_style(code)
    return pandoc.Div({
      pandoc.Div({ pandoc.Plain(cap) }, pandoc.Attr("", { "listing-caption" })),
      pandoc.CodeBlock(code, pandoc.Attr(cb.identifier ~= "" and new_id(cb.identifier) or "", classes)),
    }, pandoc.Attr("", fit and { "listing", "code-fit" } or { "listing" }, fit and { { "style", fit } } or {}))
  end

  local function results_table(cb)
    local a = cb.attributes
    local path = a.file
    if not path then
      problem(f.path, "results-table needs file=\"results/<gpu>/results.csv\"")
      return pandoc.Null()
    end
    local t = load_csv(path)
    if not t then
      problem(f.path, "results-table: no file " .. path)
      return pandoc.Null()
    end
    local cols = a.cols and split_list(a.cols) or t.header
    local rows = {}
    if a.rows then
      for _, r in ipairs(split_list(a.rows)) do
        if not t.row[r] then
          problem(f.path, string.format("results-table: %s has no row labelled '%s'", path, r))
        else
          rows[#rows + 1] = t.row[r]
        end
      end
    else
      rows = t.rows
    end
    local titles = a.headers and split_list(a.headers) or {}
    local percent = {}
    for _, c in ipairs(split_list(a.percent)) do percent[c] = true end
    local header, aligns, widths = {}, {}, {}
    for k, c in ipairs(cols) do
      if not t.col[c] then
        problem(f.path, string.format("results-table: %s has no column '%s' (it has %s)", path, c,
          table.concat(t.header, ", ")))
      end
      header[k] = { pandoc.Plain({ pandoc.Str(titles[k] or column_title(c)) }) }
      aligns[k] = (c == "label") and pandoc.AlignLeft or pandoc.AlignRight
      widths[k] = 0
    end
    local body = {}
    for _, r in ipairs(rows) do
      local cells = {}
      for k, c in ipairs(cols) do
        local v = t.col[c] and r[t.col[c]] or ""
        local text = format_cell(c, v, is_percent(c, percent))
        local code = c == "label" or text:find("^", 1, true)  -- kernel names with k^T
        cells[k] = { pandoc.Plain(code and { pandoc.Code(text) } or { pandoc.Str(text) }) }
      end
      body[#body + 1] = cells
    end
    if LATEX then
      -- LaTeX sets a column without a width on one line, however long its
      -- title: when the titles would make the table wider than the page,
      -- give every column a width, so that titles wrap onto two lines.
      local natural, wrapped, total_natural, total_wrapped = {}, {}, 0, 0
      for k = 1, #cols do
        local cell = 0
        for _, r in ipairs(body) do cell = math.max(cell, utf8.len(stringify(r[k])) or 0) end
        if cols[k] == "label" then cell = math.ceil(cell * 1.4) end  -- typewriter is wider
        local title_text = stringify(header[k])
        local title, word = utf8.len(title_text) or 0, 0
        for w in title_text:gmatch("%S+") do word = math.max(word, utf8.len(w) or 0) end
        natural[k] = math.max(cell, title) + 2
        wrapped[k] = math.max(cell, math.ceil(title / 2), math.ceil(word * 1.2)) + 3
        total_natural = total_natural + natural[k]
        total_wrapped = total_wrapped + wrapped[k]
      end
      local room = #cols >= 8 and 105 or (#cols >= 6 and 95 or 85)  -- characters per text line
      if total_natural > room then
        for k = 1, #cols do widths[k] = wrapped[k] / total_wrapped end
      end
    end
    local caption = a.caption and pandoc.read(a.caption, "markdown").blocks[1].content or {}
    local tbl = pandoc.utils.from_simple_table(pandoc.SimpleTable(caption, aligns, widths, header, body))
    -- under it: where the numbers come from
    local note = { pandoc.Str("Source:"), pandoc.Space(), pandoc.Code(path) }
    local env = load_environment(path)
    if env then
      -- A results.csv of several sessions: the date and commit of the rows shown.
      local of, sessions = load_sessions(path)
      if of then
        local seen, ids = {}, {}
        for _, r in ipairs(rows) do
          local k = of[r[t.col.label or 1]]
          if k and not seen[k] then seen[k] = true ids[#ids + 1] = k end
        end
        table.sort(ids)
        if #ids == 1 then
          env = { gpu = env.gpu, date = sessions[ids[1]].date, commit = sessions[ids[1]].commit }
        elseif #ids > 1 then
          local commits = {}
          for _, k in ipairs(ids) do commits[#commits + 1] = sessions[k].commit end
          env = { gpu = env.gpu, date = sessions[ids[1]].date,
                  commit = table.concat(commits, ", ") .. " (" .. #ids .. " sessions of the benchmark)" }
        end
      end
      local bits = {}
      if env.gpu then bits[#bits + 1] = env.gpu end
      if env.date then bits[#bits + 1] = env.date:sub(1, 10) end
      if env.commit then bits[#bits + 1] = (env.commit:find(",") and "commits " or "commit ") .. env.commit end
      if #bits > 0 then
        note[#note + 1] = pandoc.Str(";")
        note[#note + 1] = pandoc.Space()
        note[#note + 1] = pandoc.Str(table.concat(bits, ", "))
      end
    end
    note[#note + 1] = pandoc.Str(".")
    if LATEX then
      -- wide tables in a smaller size, so that they fit the text width
      local size = #cols >= 8 and "\\footnotesize\\setlength{\\tabcolsep}{4pt}"
                   or (#cols >= 6 and "\\small\\setlength{\\tabcolsep}{5pt}" or "")
      return { pandoc.RawBlock("latex", "\\begingroup" .. size), tbl,
               pandoc.RawBlock("latex", "\\endgroup"),
               pandoc.RawBlock("latex", "\\BookTableSource{" .. latex_inlines(note) .. "}") }
    end
    return pandoc.Div({ tbl, pandoc.Div({ pandoc.Plain(note) }, pandoc.Attr("", { "table-source" })) },
      pandoc.Attr("", { "results-table" }))
  end

  local function CodeBlock(cb)
    if cb.attributes.include then return listing(cb) end
    if cb.classes:includes("results-table") then return results_table(cb) end
    if cb.attributes.anchor or cb.attributes["function"] then
      problem(f.path, "a code block has anchor=/function= but no include=\"path\"")
    end
    if LATEX then return latex_code_block(cb.text, cb.classes) end
    for i, c in ipairs(cb.classes) do
      if c == "cuda" or c == "cu" then cb.classes[i] = "cpp" end
    end
    cb.identifier = new_id(cb.identifier)
    local fit = html_fit_style(cb.text)
    if fit then return pandoc.Div({ cb }, pandoc.Attr("", { "code-fit" }, { { "style", fit } })) end
    return cb
  end

  local function result_span(content, path, row, col, scale, shown)
    local why = check_result(stringify(content), path, row, col, scale)
    if why then problem(f.path, "result " .. why) end
    local which = type(row) == "table" and ("where " .. row.where) or ("row " .. row)
    local title = string.format("%s, %s, column %s", path, which, col)
    return pandoc.Span(content, pandoc.Attr("", { "result" }, { { "title", title } }))
  end

  local function Span(s)
    s.identifier = new_id(s.identifier)
    if not s.classes:includes("result") then return s end
    local a = s.attributes
    if not (a.file and (a.row or a.where) and a.col) or (a.row and a.where) then
      problem(f.path, string.format("result '%s' needs file=, row= (or where=, for a CSV without labels) "
        .. "and col=", stringify(s.content)))
      return s
    end
    local scale = a.scale and tonumber(a.scale)
    if a.scale and not scale then problem(f.path, "result: scale='" .. a.scale .. "' is not a number") end
    local out = result_span(s.content, a.file, a.row or { where = a.where }, a.col, scale)
    if LATEX then return s.content end
    return out
  end

  local function Div(d)
    d.identifier = new_id(d.identifier)
    return d
  end

  local function Link(l)
    local target = l.target
    if has_scheme(target) then return nil end
    if target:sub(1, 1) == "#" then
      local id = target:sub(2)
      local fig = id:match("^figure%-(%w+%-%d+)$")
      if fig then  -- a figure is named by its number: [Figure 4.1](#figure-4-1)
        local want = "Figure " .. fig:upper():gsub("%-", ".")
        if stringify(l.content):lower() ~= want:lower() then
          problem(f.path, string.format("link to #%s reads '%s': write '%s'", id, stringify(l.content), want))
        end
      end
      if f.ids[id] then
        l.target = "#" .. f.ids[id]
      elseif global_ids[id] and #global_ids[id] == 1 then
        l.target = "#" .. global_ids[id][1]
      else
        problem(f.path, "link to #" .. id .. ": no heading or element has that id"
          .. (global_ids[id] and " (several files have it: link to FILE.md#" .. id .. ")" or ""))
      end
      return l
    end
    local path, frag = target:match("^([^#]*)#?(.*)$")
    local p = resolve(f.dir, path)
    -- a number from results, written as a link: [44,977](../../results/h100/results.csv#ch00/tok_per_s)
    if p:match("%.csv$") and frag:match("^[^/]+/[^/]+$") then
      local row, col = frag:match("^([^/]+)/([^/]+)$")
      local out = result_span(l.content, p, row, col, nil)
      if LATEX then return l.content end
      return out
    end
    local inc = included[p]
    if inc and (frag == "" or inc.file.ids["included-" .. frag]) then
      l.target = "#" .. inc.file.ids[frag == "" and inc.id or ("included-" .. frag)]
      return l
    end
    local other = by_path[p]
    if other then
      if frag == "" or frag == other.title_id then
        l.target = "#" .. other.info.prefix
      elseif other.ids[frag] then
        l.target = "#" .. other.ids[frag]
      else
        problem(f.path, "link to " .. target .. ": " .. p .. " has no heading with id '" .. frag .. "'")
      end
      return l
    end
    if path ~= "" and not exists(p) then
      problem(f.path, "link to " .. target .. ": no file " .. p)
      return l
    end
    if REPO_URL then
      l.target = REPO_URL .. "/" .. p .. (frag ~= "" and ("#" .. frag) or "")
      return l
    end
    if HTML then
      l.target = "../../" .. p .. (frag ~= "" and ("#" .. frag) or "")  -- from build/book/
      return l
    end
    return l.content  -- PDF without a repository address: the text alone
  end

  -- A figure: its id, and in the HTML its number before the caption (LaTeX
  -- numbers its figures itself, in the same order: Figure 4.1).
  local figures = 0
  local function Para(p)
    local label = figure_label(f, p, figures + 1)
    if not label then return nil end
    figures = figures + 1
    local img = p.content[1]
    img.identifier = figure_id(label)
    if HTML then
      local cap = { pandoc.Span({ pandoc.Str("Figure"), pandoc.Space(), pandoc.Str(label .. ":") },
                                pandoc.Attr("", { "figure-number" })), pandoc.Space() }
      for _, el in ipairs(img.caption) do cap[#cap + 1] = el end
      img.caption = cap
    end
    return p
  end

  local function Image(img)
    if has_scheme(img.src) then return nil end
    local p = resolve(f.dir, img.src)
    if not exists(p) then
      local hint = p:match("^results/[^/]+/plots/") and " (make plots draws it)"
                   or " (image paths are relative to the markdown file, as on GitHub)"
      problem(f.path, "image " .. img.src .. ": no file " .. p .. hint)
      return img
    end
    if p:match("%.svg$") and (LATEX or CHECK) then
      local alt
      for _, ext in ipairs({ ".pdf", ".png" }) do
        local cand = p:gsub("%.svg$", ext)
        if exists(cand) then alt = cand break end
      end
      if not alt then
        problem(f.path, "image " .. p .. ": the PDF needs " .. p:gsub("%.svg$", ".pdf") .. " or .png beside it")
      elseif LATEX then
        p = alt
      end
    end
    img.src = p
    return img
  end

  -- HTML: tables scroll sideways on narrow screens instead of overflowing
  local function Table(t)
    if HTML then return pandoc.Div({ t }, pandoc.Attr("", { "table-wrap" })) end
    return nil
  end

  -- A caret in prose would print as a raised accent in the PDF. Write powers
  -- as math ($2^{-8}$) and names as code (`k^T`); one left in the text
  -- (2^-9, lnf^T) is set as a superscript, its minus a minus sign.
  local function Str(s)
    local base, exp, rest = s.text:match("^(.-[%w%)])%^([-+]?[%w.]+)(.*)$")
    if not base then return nil end
    exp = exp:gsub("^%-", "\u{2212}")
    return { pandoc.Str(base), pandoc.Superscript({ pandoc.Str(exp) }), pandoc.Str(rest) }
  end

  local function Code(c)
    if LATEX then return latex_inline_code(c.text) end
    -- HTML: short code never breaks at its hyphens; long code (paths) may wrap
    if HTML and utf8.len(c.text) and utf8.len(c.text) > 30 then c.classes:insert("long") return c end
    return nil
  end

  local blocks = pandoc.walk_block(pandoc.Div(f.doc.blocks), {
    Header = Header, CodeBlock = CodeBlock, Span = Span, Div = Div, Link = Link, Image = Image, Code = Code,
    Table = Table, Para = Para, Str = Str,
  }).content
  return blocks
end

function Pandoc(doc)
  local meta = doc.meta
  CHECK = meta["book-check"] == true or stringify(meta["book-check"] or "") == "true"
  if meta["book-repo-url"] then REPO_URL = stringify(meta["book-repo-url"]):gsub("/$", "") end
  if meta["book-code-width"] then CODE_WIDTH = tonumber(stringify(meta["book-code-width"])) or CODE_WIDTH end
  if REPO_URL == "" then REPO_URL = nil end

  for _, path in ipairs(PANDOC_STATE.input_files) do
    local p = normalize(path)
    local text = read_file(p)
    if path == "-" then  -- standard input, already read by pandoc: its document
      local f = { path = "(stdin)", dir = ".", info = classify("(stdin)"), doc = doc }
      files[#files + 1] = f
    elseif not text then
      problem(p, "cannot read it")
    else
      local f = { path = p, dir = dirname(p), info = classify(p), doc = pandoc.read(text, READER) }
      files[#files + 1] = f
      by_path[p] = f
    end
  end
  for _, f in ipairs(files) do expand_includes(f) end
  for _, f in ipairs(files) do collect_ids(f) end

  local blocks = {}
  local seen_chapter, seen_appendix = false, false
  for _, f in ipairs(files) do
    local out = transform(f)
    if LATEX then
      if f.info.kind == "chapter" then
        if not seen_chapter then blocks[#blocks + 1] = pandoc.RawBlock("latex", "\\BookMainmatter") end
        seen_chapter = true
        blocks[#blocks + 1] = pandoc.RawBlock("latex", "\\setcounter{chapter}{" .. (f.info.number - 1) .. "}")
      elseif f.info.kind == "appendix" then
        if not seen_chapter then blocks[#blocks + 1] = pandoc.RawBlock("latex", "\\BookMainmatter") seen_chapter = true end
        if not seen_appendix then blocks[#blocks + 1] = pandoc.RawBlock("latex", "\\appendix") end
        seen_appendix = true
        local idx = f.info.letter:byte() - ("A"):byte()
        blocks[#blocks + 1] = pandoc.RawBlock("latex", "\\setcounter{chapter}{" .. idx .. "}")
      end
    end
    for _, b in ipairs(out) do blocks[#blocks + 1] = b end
  end

  if #errors > 0 then
    io.stderr:write("book: " .. #errors .. " problem" .. (#errors > 1 and "s" or "") .. ":\n")
    for _, e in ipairs(errors) do io.stderr:write("  " .. e .. "\n") end
    os.exit(1)
  end
  return pandoc.Pandoc(blocks, doc.meta)
end
