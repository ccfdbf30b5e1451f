"""The SQL text of a Rust string constant: `python3 rust_sql.py FILE CONST`. The constant is a
raw string, or a `concat!` of string literals and SQL macros (`macro_rules!` under shared/src,
with or without literal arguments), so the benchmarks run the statements the code runs."""
import glob
import re
import sys

TOKEN = re.compile(
    r'\s*(?:r#"(?P<raw>.*?)"#|"(?P<str>(?:\\.|[^"\\])*)"'
    r'|(?P<call>(?:\$?\w+::)*\w+)!\(|\$(?P<param>\w+)|(?P<close>\))|(?P<comma>,))',
    re.S,
)


def expr(text, pos, bound):
    """The value of the expression at pos, and the position after it."""
    m = TOKEN.match(text, pos)
    if not m:
        sys.exit(f"rust_sql: cannot read {text[pos:pos + 40]!r}")
    if m.group("raw") is not None:
        return m.group("raw"), m.end()
    if m.group("str") is not None:
        return m.group("str").encode().decode("unicode_escape"), m.end()
    if m.group("param"):
        return bound[m.group("param")], m.end()
    if m.group("call"):
        args, pos = arguments(text, m.end(), bound)
        name = m.group("call").split("::")[-1]
        return ("".join(args) if name == "concat" else expand(name, args)), pos
    sys.exit(f"rust_sql: unexpected {m.group(0)!r}")


def arguments(text, pos, bound):
    """The values of a call's arguments, up to its closing parenthesis."""
    values = []
    while True:
        m = TOKEN.match(text, pos)
        if m and m.group("close"):
            return values, m.end()
        if m and m.group("comma"):
            pos = m.end()
            continue
        value, pos = expr(text, pos, bound)
        values.append(value)


def expand(name, args):
    for path in glob.glob("shared/src/**/*.rs", recursive=True):
        text = open(path).read()
        m = re.search(r"macro_rules!\s+" + name + r"\s*\{\s*\((?P<params>[^)]*)\)\s*=>\s*\{", text)
        if m:
            params = re.findall(r"\$(\w+):", m.group("params"))
            return expr(text, m.end(), dict(zip(params, args)))[0]
    sys.exit(f"rust_sql: no macro {name}! under shared/src")


path, const = sys.argv[1], sys.argv[2]
source = open(path).read()
found = re.search(r"^(?:pub(?:\(crate\))? )?const " + const + r": &str =", source, re.M)
if not found:
    sys.exit(f"rust_sql: no SQL constant {const} in {path}")
print(expr(source, found.end(), {})[0])
