"""Reads the two_tables example and the sluice_table module with python-hcl2 and prints,
as one JSON document, what tests/cli/terraform.rs needs to render and check each stream's
SLUICE_CONFIG offline:

* `streams`: per sluice_table module block of the example, the inputs of the
  sluice_config module (the block's literal / var.* arguments over sluice_table's
  defaults, restricted to sluice_config's variables); references the test cannot
  evaluate are replaced by documented placeholders (the stack's names, the state
  machine ARN built from the function name);
* `problems`: ways the chain example -> sluice_table -> sluice_config is broken
  (an input sluice_table does not forward unchanged, an expression this reader cannot
  resolve, a function whose environment is not local.environment);
* `environment`: the environment variable names the functions get;
* `fleet`: the inputs of the fleet example's sluice_fleet block (`tables` from its
  tables.tf, `defaults`, `tags`), sluice_table's defaults and the names of
  sluice_config's inputs, for the test to evaluate sluice_fleet's streams.tf and
  render every stream; `problems` also lists sluice_table inputs sluice_fleet does
  not forward as `lookup(each.value, "<input>", null)`.

Usage: example_inputs.py TERRAFORM_DIR
"""

import json
import os
import sys

import hcl2

# What the test substitutes for values only a real plan knows.
PLACEHOLDER_ACCOUNT = "123456789012"
PLACEHOLDER_STACK = {
    "bucket_name": None,
    "state_table_name": "sluice-state",
    "kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/00000000-0000-0000-0000-000000000000",
}


def load(path):
    with open(path) as f:
        return hcl2.load(f)


def unquote(name):
    return name[1:-1] if len(name) >= 2 and name[0] == name[-1] == '"' else name


def blocks(doc, kind):
    """{name: body} of `kind "name" {}` blocks (variable, module, output)."""
    out = {}
    for entry in doc.get(kind, []):
        for name, body in entry.items():
            out[unquote(name)] = body
    return out


def resources(doc, rtype):
    out = {}
    for entry in doc.get("resource", []):
        for typ, named in entry.items():
            if unquote(typ) == rtype:
                for name, body in named.items():
                    out[unquote(name)] = body
    return out


class Unresolved(Exception):
    pass


def value(v, refs):
    """A python-hcl2 value as plain JSON; `refs` maps whole-expression references."""
    if isinstance(v, dict):
        return {unquote(k): value(x, refs) for k, x in v.items() if not k.startswith("__")}
    if isinstance(v, list):
        return [value(x, refs) for x in v]
    if isinstance(v, str):
        if v.startswith("${") and v.endswith("}"):
            expr = v[2:-1].strip()
            if expr == "null":
                return None
            if expr in refs:
                return refs[expr]
            raise Unresolved(expr)
        if len(v) >= 2 and v[0] == v[-1] == '"' and "${" not in v:
            return json.loads(v)
        raise Unresolved(v)
    return v


def main(root):
    example = os.path.join(root, "examples", "two_tables")
    table_dir = os.path.join(root, "modules", "sluice_table")
    config_dir = os.path.join(root, "modules", "sluice_config")
    problems = []

    tfvars = value(load(os.path.join(example, "terraform.tfvars.example")), {})
    ex_vars = {}
    for name, body in blocks(load(os.path.join(example, "variables.tf")), "variable").items():
        ex_vars[name] = tfvars.get(name, value(body.get("default"), {}))

    stack = dict(PLACEHOLDER_STACK, bucket_name=tfvars["bucket_name"])
    refs = {f"var.{k}": v for k, v in ex_vars.items()}
    refs["module.stack.for_tables"] = stack

    table_main = load(os.path.join(table_dir, "main.tf"))
    table_vars = blocks(load(os.path.join(table_dir, "variables.tf")), "variable")
    config_vars = blocks(load(os.path.join(config_dir, "variables.tf")), "variable")

    # sluice_table must hand every sluice_config input through unchanged (same name),
    # except the state machine ARN, which it builds.
    built = {"baseline_state_machine_arn": "${local.machine_arn}"}
    forward = blocks(table_main, "module").get("config", {})
    for name in config_vars:
        want = built.get(name, "${var.%s}" % name)
        if forward.get(name) != want:
            problems.append(f"sluice_table passes {name} = {forward.get(name)!r} to sluice_config, expected {want!r}")
        if name not in built and name not in table_vars:
            problems.append(f"sluice_table has no variable {name} (a sluice_config input)")

    streams = []
    for module, body in blocks(load(os.path.join(example, "main.tf")), "module").items():
        if not value(body["source"], {}).endswith("/sluice_table"):
            continue
        args = {}
        for name, raw in body.items():
            if name.startswith("__") or name == "source":
                continue
            try:
                args[name] = value(raw, refs)
            except Unresolved as e:
                if name in config_vars or name in ("baseline_state_machine", "function_name"):
                    problems.append(f"example module {module}: cannot evaluate {name} = {e} offline")
        merged = {name: value(b.get("default"), {}) for name, b in table_vars.items()}
        merged.update(args)
        inputs = {name: merged.get(name) for name in config_vars if name not in built}
        if merged.get("baseline_state_machine"):
            fn = merged.get("function_name") or f"sluice-{merged['job']}"
            region = ex_vars.get("region") or "eu-west-1"
            inputs["baseline_state_machine_arn"] = (
                f"arn:aws:states:{region}:{PLACEHOLDER_ACCOUNT}:stateMachine:{fn}-baseline"
            )
        streams.append({"module": module, "job": merged["job"], "inputs": inputs})

    environment = None
    for entry in table_main.get("locals", []):
        if "environment" in entry:
            environment = {k: v for k, v in entry["environment"].items() if not k.startswith("__")}
    if environment is None:
        problems.append("sluice_table has no local.environment")
        environment = {}
    for name, fn in resources(table_main, "aws_lambda_function").items():
        variables = (fn.get("environment") or [{}])[0].get("variables")
        if variables != "${local.environment}":
            problems.append(f"aws_lambda_function.{name} sets environment {variables!r}, not local.environment")
    if environment.get("SLUICE_CONFIG") != "${module.config.json}":
        problems.append(f"SLUICE_CONFIG is {environment.get('SLUICE_CONFIG')!r}, not module.config.json")

    fleet = fleet_inputs(root, table_vars, config_vars, problems)
    json.dump(
        {"streams": streams, "problems": problems, "environment": sorted(environment), "fleet": fleet},
        sys.stdout,
        indent=1,
    )


def fleet_inputs(root, table_vars, config_vars, problems):
    example = os.path.join(root, "examples", "fleet")
    fleet_dir = os.path.join(root, "modules", "sluice_fleet")
    tfvars = value(load(os.path.join(example, "terraform.tfvars.example")), {})
    ex_vars = {}
    for name, body in blocks(load(os.path.join(example, "variables.tf")), "variable").items():
        ex_vars[name] = tfvars.get(name, value(body.get("default"), {}))
    refs = {f"var.{k}": v for k, v in ex_vars.items()}
    refs["local.tables"] = None  # filled below
    tables = {}
    for entry in load(os.path.join(example, "tables.tf")).get("locals", []):
        if "tables" in entry:
            tables = value(entry["tables"], refs)
    refs["local.tables"] = tables
    refs["module.stack.for_tables"] = dict(PLACEHOLDER_STACK, bucket_name=tfvars["bucket_name"])
    call = blocks(load(os.path.join(example, "main.tf")), "module").get("fleet", {})
    inputs = {}
    for name in ("defaults", "tags"):
        try:
            inputs[name] = value(call.get(name, {}), refs)
        except Unresolved as e:
            problems.append(f"fleet example: cannot evaluate {name} = {e} offline")
    forward = blocks(load(os.path.join(fleet_dir, "main.tf")), "module").get("table", {})
    own = {"job": "${each.key}", "stack": "${var.stack}", "package_path": "${var.package_path}", "tags": "${each.value.tags}"}
    for name in table_vars:
        want = own.get(name, '${lookup(each.value, "%s", null)}' % name)
        if forward.get(name) != want:
            problems.append(f"sluice_fleet passes {name} = {forward.get(name)!r} to sluice_table, expected {want!r}")
    return {
        "tables": tables,
        "defaults": inputs.get("defaults", {}),
        "tags": inputs.get("tags", {}),
        "region": ex_vars.get("region") or "eu-west-1",
        "table_defaults": {name: value(b.get("default"), {}) for name, b in table_vars.items()},
        "config_vars": sorted(config_vars),
    }


if __name__ == "__main__":
    main(sys.argv[1])
