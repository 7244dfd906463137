//! The baseline state machine definition and the code cannot drift apart: the ASL is
//! validated with `asl-validator`, and a small interpreter walks it — building every
//! task's payload from the definition's own `Parameters` / `ItemSelector` / `ResultSelector`
//! / `ResultPath` — invoking the real binary as a Lambda function for each task.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value, json};
use support::lambda_api::{Function, RuntimeApi};
use support::{Job, TestDb, read_rows, replay};

const ASL: &str = "infra/stepfunctions/baseline.asl.json";

fn asl_validator() -> Option<String> {
    let out = Command::new("infra/local/asl-validator.sh")
        .output()
        .expect("runs the install script");
    if !out.status.success() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "asl-validator could not be installed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        eprintln!(
            "SKIPPED: asl-validator unavailable: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn definition_is_valid_asl_and_the_validator_catches_errors() {
    let Some(validator) = asl_validator() else {
        return;
    };
    let ok = Command::new(&validator)
        .args(["--json-path", ASL])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    let mut broken: Value = serde_json::from_str(&std::fs::read_to_string(ASL).unwrap()).unwrap();
    broken["States"]["Plan"]["Next"] = json!("NoSuchState");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    std::fs::write(&path, broken.to_string()).unwrap();
    let bad = Command::new(&validator)
        .arg("--json-path")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        !bad.status.success(),
        "the validator accepted a dangling Next"
    );
}

/// Resolves a JSONPath of the simple form `$`, `$.a.b` or `$$.Map.Item.Value`.
fn path(root: &Value, context: &Value, expr: &str) -> Value {
    let (base, rest) = if let Some(rest) = expr.strip_prefix("$$") {
        (context, rest)
    } else {
        (root, expr.strip_prefix('$').expect("a JSONPath"))
    };
    rest.split('.')
        .filter(|s| !s.is_empty())
        .fold(base.clone(), |v, key| {
            v.get(key).cloned().unwrap_or(Value::Null)
        })
}

/// Applies a Parameters / ItemSelector / ResultSelector template.
fn template(tpl: &Value, input: &Value, context: &Value) -> Value {
    match tpl {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, value) in fields {
                match key.strip_suffix(".$") {
                    Some(name) => out.insert(
                        name.to_owned(),
                        path(input, context, value.as_str().unwrap()),
                    ),
                    None => out.insert(key.clone(), template(value, input, context)),
                };
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn set_result(input: Value, result_path: Option<&Value>, result: Value) -> Value {
    match result_path {
        Some(Value::Null) => input,
        Some(Value::String(p)) if p != "$" => {
            let mut input = input;
            let key = p.strip_prefix("$.").expect("a top-level ResultPath");
            input
                .as_object_mut()
                .unwrap()
                .insert(key.to_owned(), result);
            input
        }
        _ => result,
    }
}

struct Walker<'a> {
    api: &'a RuntimeApi,
    invocations: Vec<String>,
}

impl Walker<'_> {
    fn run(&mut self, states: &Value, start: &str, mut input: Value, context: &Value) -> Value {
        let mut current = start.to_owned();
        loop {
            let state = &states[&current];
            let output = match state["Type"].as_str().unwrap() {
                "Task" => {
                    assert_eq!(state["Resource"], "arn:aws:states:::lambda:invoke");
                    let params = template(&state["Parameters"], &input, context);
                    assert_eq!(params["FunctionName"], "${function_arn}");
                    let payload = params["Payload"].clone();
                    self.invocations
                        .push(payload["action"].as_str().unwrap_or("?").to_owned());
                    let response = self.api.call(payload);
                    let result = json!({ "Payload": response, "StatusCode": 200 });
                    let result = match state.get("ResultSelector") {
                        Some(selector) => template(selector, &result, context),
                        None => result,
                    };
                    set_result(input.clone(), state.get("ResultPath"), result)
                }
                "Map" => {
                    let items = path(&input, context, state["ItemsPath"].as_str().unwrap());
                    let concurrency = path(
                        &input,
                        context,
                        state["MaxConcurrencyPath"].as_str().unwrap(),
                    );
                    assert!(
                        concurrency.as_u64().is_some_and(|c| c >= 1),
                        "MaxConcurrencyPath must give a count"
                    );
                    let processor = &state["ItemProcessor"];
                    let mut results = vec![];
                    for (index, item) in items
                        .as_array()
                        .expect("ItemsPath is a list")
                        .iter()
                        .enumerate()
                    {
                        let map_context =
                            json!({ "Map": { "Item": { "Value": item, "Index": index } } });
                        let item_input = template(&state["ItemSelector"], &input, &map_context);
                        let start = processor["StartAt"].as_str().unwrap();
                        results.push(self.run(
                            &processor["States"],
                            start,
                            item_input,
                            &map_context,
                        ));
                    }
                    set_result(
                        input.clone(),
                        state.get("ResultPath"),
                        Value::Array(results),
                    )
                }
                other => panic!("state type {other} is not used by the baseline machine"),
            };
            if state.get("End").is_some_and(|e| e == true) {
                return output;
            }
            input = output;
            current = state["Next"].as_str().expect("Next or End").to_owned();
        }
    }
}

#[test]
fn walking_the_definition_runs_the_real_handlers_to_an_exact_baseline() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "asl");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3000) i; ANALYZE t");
    let job = Job::postgres(&db, &["t"], "baseline: { chunk_rows: 1000, parallel: 3 }");
    let definition: Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(ASL)).unwrap()).unwrap();
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let mut walker = Walker {
        api: &api,
        invocations: vec![],
    };
    let start = definition["StartAt"].as_str().unwrap().to_owned();
    let output = walker.run(&definition["States"], &start, json!({}), &json!({}));
    assert_eq!(output["baseline"]["tables"]["t"]["rows"], 3000, "{output}");
    let chunks = walker
        .invocations
        .iter()
        .filter(|a| *a == "baseline.chunk")
        .count();
    assert!(chunks >= 3, "{:?}", walker.invocations);
    assert_eq!(
        walker.invocations.first().map(String::as_str),
        Some("baseline.anchor")
    );
    assert_eq!(
        walker.invocations.last().map(String::as_str),
        Some("baseline.finish")
    );
    // The machine's result is an exact baseline, and drains continue from its anchor.
    db.sql("UPDATE t SET v = 'x' WHERE id = 5");
    let summary = api.call(json!({"action": "drain"}));
    assert_eq!(summary["rows"], 1);
    let mut rows = read_rows(&job.out().join("t/snapshot"), "part-");
    rows.extend(read_rows(&job.out().join("t"), "cdc-"));
    rows.sort_by(|a, b| {
        (a["__pos"].clone(), a["__seq"].clone()).cmp(&(b["__pos"].clone(), b["__seq"].clone()))
    });
    let state = replay(&rows, &["id"]);
    assert_eq!(state.len(), 3000);
    assert_eq!(
        state[&vec![Some("5".to_string())]]["v"].as_deref(),
        Some("x")
    );
}
