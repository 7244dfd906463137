"""Keeps the Inputs / Outputs tables of each module's README.md in step with its
variables.tf / outputs.tf: the text between `<!-- BEGIN_TF_DOCS -->` and
`<!-- END_TF_DOCS -->` is generated. `--check` exits 1 when a README is stale;
without it the READMEs are rewritten.

Usage: readme_tables.py [--check] MODULES_DIR
"""

import json
import pathlib
import sys

import hcl2

BEGIN, END = "<!-- BEGIN_TF_DOCS -->", "<!-- END_TF_DOCS -->"


def unquote(s):
    return s[1:-1] if isinstance(s, str) and len(s) >= 2 and s[0] == s[-1] == '"' else s


def expr(v):
    """A default value as HCL-ish text for the table."""
    if isinstance(v, str):
        if v.startswith("${") and v.endswith("}"):
            return v[2:-1]
        return v
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(", ", " = ")).replace('"', "")
    return json.dumps(v)


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def tables(module):
    out = ["## Inputs", "", "| Name | Description | Type | Default |", "| --- | --- | --- | --- |"]
    with open(module / "variables.tf") as f:
        doc = hcl2.load(f)
    for entry in doc.get("variable", []):
        for name, body in entry.items():
            default = "(required)" if "default" not in body else f"`{cell(expr(body['default']))}`"
            typ = cell(expr(body.get("type", "any"))).replace("\\|", "|")
            out.append(f"| `{unquote(name)}` | {cell(unquote(body.get('description', '')))} | `{typ}` | {default} |")
    out += ["", "## Outputs", "", "| Name | Description |", "| --- | --- |"]
    with open(module / "outputs.tf") as f:
        doc = hcl2.load(f)
    for entry in doc.get("output", []):
        for name, body in entry.items():
            out.append(f"| `{unquote(name)}` | {cell(unquote(body.get('description', '')))} |")
    return "\n".join(out)


def main(args):
    check = "--check" in args
    root = pathlib.Path([a for a in args if a != "--check"][0])
    stale = []
    for module in sorted(p for p in root.iterdir() if (p / "variables.tf").exists()):
        readme = module / "README.md"
        text = readme.read_text() if readme.exists() else f"# {module.name}\n\n{BEGIN}\n{END}\n"
        if BEGIN not in text or END not in text:
            text += f"\n{BEGIN}\n{END}\n"
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        new = f"{head}{BEGIN}\n{tables(module)}\n{END}{tail}"
        if new != text:
            stale.append(str(readme))
            if not check:
                readme.write_text(new)
    if check and stale:
        print("stale module READMEs (run terraform/tests/readme_tables.py terraform/modules):", *stale, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
