//! A small interpreter of the Amazon States Language, enough for sluice's state machines
//! (infra/stepfunctions/*.asl.json): it walks a definition — building every task's payload
//! from the definition's own `Parameters` / `ItemSelector` / `ResultSelector` /
//! `ResultPath` / `OutputPath`, taking `Choice`s, applying `Pass`, `Succeed` and `Fail`,
//! retrying and catching task errors as `Retry` / `Catch` say, reading a Distributed Map's
//! items from S3 (moto) through its `ItemReader` — and invokes the real binary as the
//! Lambda function of every task. Every state's input and output and every Map result is
//! held to Step Functions' 256 KiB payload limit. What it does not know it refuses
//! (panics), so a definition cannot quietly use a feature the tests never ran.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::lambda_api::{Outcome, RuntimeApi};

/// Step Functions' limit on a state's input and output, and on a Map's collected results.
pub const PAYLOAD_LIMIT: usize = 256 * 1024;

/// A definition read from `path` (relative to the repository root).
pub fn definition(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(Path::new(path)).unwrap()).unwrap()
}

/// The `asl-validator` executable, installed on first use; `None` (a skip) when it cannot
/// be installed outside CI.
pub fn validator() -> Option<String> {
    let out = Command::new("infra/local/asl-validator.sh")
        .output()
        .expect("runs the install script");
    if !out.status.success() {
        if super::in_ci() {
            panic!(
                "asl-validator could not be installed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        super::skipped(&format!(
            "asl-validator unavailable: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Whether `validator` accepts the definition in the file at `path`.
pub fn valid(validator: &str, path: &Path) -> Result<(), String> {
    let out = Command::new(validator)
        .arg("--json-path")
        .arg(path)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Resolves a JSONPath of the forms `$`, `$.a.b`, `$$.Map.Item.Value` and `$[*].a`
/// (a projection over an array).
pub fn path(root: &Value, context: &Value, expr: &str) -> Value {
    let (base, rest) = if let Some(rest) = expr.strip_prefix("$$") {
        (context, rest)
    } else {
        (root, expr.strip_prefix('$').expect("a JSONPath"))
    };
    resolve(base, rest, expr)
}

fn resolve(value: &Value, rest: &str, expr: &str) -> Value {
    if let Some(after) = rest.strip_prefix("[*]") {
        let items = value
            .as_array()
            .unwrap_or_else(|| panic!("States.Runtime: {expr}: [*] over a non-array"));
        return Value::Array(items.iter().map(|v| resolve(v, after, expr)).collect());
    }
    let Some(rest) = rest.strip_prefix('.') else {
        assert!(rest.is_empty(), "unsupported JSONPath {expr}");
        return value.clone();
    };
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    let (key, after) = rest.split_at(end);
    match value.get(key) {
        Some(found) => resolve(found, after, expr),
        None => panic!("States.Runtime: {expr} does not resolve ({key} missing)"),
    }
}

/// The intrinsic functions the definitions use: `States.ArrayContains(path, 'text')`.
fn intrinsic(call: &str, input: &Value, context: &Value) -> Value {
    let args = call
        .strip_prefix("States.ArrayContains(")
        .and_then(|a| a.strip_suffix(')'))
        .unwrap_or_else(|| panic!("intrinsic function {call} is not interpreted"));
    let (array, wanted) = args.split_once(',').expect("two arguments");
    let wanted = wanted.trim().trim_matches('\'');
    let array = path(input, context, array.trim());
    let array = array.as_array().expect("ArrayContains over an array");
    Value::Bool(array.iter().any(|v| v.as_str() == Some(wanted)))
}

/// Applies a Parameters / ItemSelector / ResultSelector template.
pub fn template(tpl: &Value, input: &Value, context: &Value) -> Value {
    match tpl {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, value) in fields {
                match key.strip_suffix(".$") {
                    Some(name) => {
                        let expr = value.as_str().unwrap();
                        let resolved = if expr.starts_with("States.") {
                            intrinsic(expr, input, context)
                        } else {
                            path(input, context, expr)
                        };
                        out.insert(name.to_owned(), resolved)
                    }
                    None => out.insert(key.clone(), template(value, input, context)),
                };
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A state's `ResultPath`: null keeps the input, `$.key` sets one top-level key, absent or
/// `$` replaces the input.
pub fn set_result(input: Value, result_path: Option<&Value>, result: Value) -> Value {
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

/// A state's `OutputPath`: absent or `$` keeps the output, null makes it `{}`.
fn output_path(state: &Value, output: Value, context: &Value) -> Value {
    match state.get("OutputPath") {
        None => output,
        Some(Value::Null) => json!({}),
        Some(Value::String(p)) => path(&output, context, p),
        Some(other) => panic!("OutputPath {other} is not a path"),
    }
}

fn within_limit(what: &str, value: &Value) {
    let bytes = value.to_string().len();
    assert!(
        bytes <= PAYLOAD_LIMIT,
        "States.DataLimitExceeded: {what} is {bytes} bytes"
    );
}

/// An execution (or a Map iteration) that ended in a `Fail` state or an uncaught error.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub error: String,
    pub cause: String,
}

/// Whether an `ErrorEquals` list matches `error`.
fn matches(rule: &Value, error: &str) -> bool {
    rule["ErrorEquals"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e == "States.ALL" || e == error)
}

pub struct Walker<'a> {
    api: &'a RuntimeApi,
    /// moto's endpoint, for a Distributed Map's `ItemReader`.
    s3_endpoint: Option<&'a str>,
    /// Each invocation's time limit (the function's timeout).
    budget: Duration,
    /// The `action` of every invocation, in order.
    pub invocations: Vec<String>,
    /// Every state entered, in order (Map children included).
    pub visited: Vec<String>,
}

impl<'a> Walker<'a> {
    pub fn new(api: &'a RuntimeApi, s3_endpoint: Option<&'a str>) -> Self {
        Walker {
            api,
            s3_endpoint,
            budget: Duration::from_secs(120),
            invocations: vec![],
            visited: vec![],
        }
    }

    /// Every invocation gets `budget` (the function's timeout) instead of two minutes.
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// Walks `definition` from its `StartAt` for an execution started with `input`.
    pub fn execute(&mut self, definition: &Value, input: Value) -> Result<Value, Failed> {
        let start = definition["StartAt"].as_str().unwrap().to_owned();
        self.run(&definition["States"], &start, input, &json!({}))
    }

    /// One invocation: its response, or `(errorType, errorMessage)`.
    fn invoke(&mut self, payload: Value) -> Result<Value, (String, String)> {
        self.invocations
            .push(payload["action"].as_str().unwrap_or("?").to_owned());
        let id = self.api.invoke(payload, self.budget);
        match self.api.wait(&id, self.budget + Duration::from_secs(60)) {
            Outcome::Response(v) => Ok(v),
            Outcome::Error(e) => Err((
                e["errorType"]
                    .as_str()
                    .unwrap_or("Lambda.Unknown")
                    .to_owned(),
                e["errorMessage"].as_str().unwrap_or_default().to_owned(),
            )),
        }
    }

    /// A `Task` state: the invocation with its `Retry`s; `Err` with the `Catch` that takes
    /// an error, as `(next, output)`, or the execution's failure.
    fn task(
        &mut self,
        name: &str,
        state: &Value,
        input: &Value,
        context: &Value,
    ) -> Result<Result<Value, (String, Value)>, Failed> {
        assert_eq!(state["Resource"], "arn:aws:states:::lambda:invoke");
        let params = template(&state["Parameters"], input, context);
        assert_eq!(params["FunctionName"], "${function_arn}");
        let payload = params["Payload"].clone();
        let mut attempts: Vec<u64> = vec![0; state["Retry"].as_array().map_or(0, Vec::len)];
        let (error, cause) = loop {
            match self.invoke(payload.clone()) {
                Ok(response) => {
                    within_limit(&format!("the response to {name}"), &response);
                    let result = json!({ "Payload": response, "StatusCode": 200 });
                    let result = match state.get("ResultSelector") {
                        Some(selector) => template(selector, &result, context),
                        None => result,
                    };
                    let output = set_result(input.clone(), state.get("ResultPath"), result);
                    return Ok(Ok(output_path(state, output, context)));
                }
                Err((error, cause)) => {
                    let retry = state["Retry"].as_array().and_then(|rules| {
                        rules.iter().position(|r| {
                            matches(r, &error) && r["MaxAttempts"].as_u64().unwrap_or(3) > 0
                        })
                    });
                    match retry {
                        Some(i)
                            if attempts[i]
                                < state["Retry"][i]["MaxAttempts"].as_u64().unwrap_or(3) =>
                        {
                            attempts[i] += 1;
                        }
                        _ => break (error, cause),
                    }
                }
            }
        };
        let catch = state["Catch"]
            .as_array()
            .and_then(|rules| rules.iter().find(|r| matches(r, &error)));
        match catch {
            Some(rule) => {
                let output = set_result(
                    input.clone(),
                    rule.get("ResultPath"),
                    json!({ "Error": error, "Cause": cause }),
                );
                Ok(Err((rule["Next"].as_str().unwrap().to_owned(), output)))
            }
            None => Err(Failed { error, cause }),
        }
    }

    /// Whether a Choice rule (`And`, `StringEquals`, `BooleanEquals`,
    /// `NumericGreaterThan`) holds for `input`.
    fn holds(rule: &Value, input: &Value, context: &Value) -> bool {
        if let Some(all) = rule.get("And") {
            return all
                .as_array()
                .unwrap()
                .iter()
                .all(|r| Self::holds(r, input, context));
        }
        let value = path(input, context, rule["Variable"].as_str().unwrap());
        if let Some(expected) = rule.get("StringEquals") {
            value.as_str() == expected.as_str()
        } else if let Some(expected) = rule.get("BooleanEquals") {
            value.as_bool() == expected.as_bool()
        } else if let Some(bound) = rule.get("NumericGreaterThan") {
            value.as_f64().unwrap() > bound.as_f64().unwrap()
        } else {
            panic!("Choice rule {rule} is not interpreted")
        }
    }

    fn choose(name: &str, state: &Value, input: &Value, context: &Value) -> String {
        state["Choices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|rule| Self::holds(rule, input, context))
            .map(|rule| &rule["Next"])
            .or_else(|| state.get("Default"))
            .unwrap_or_else(|| panic!("States.NoChoiceMatched in {name}: {input}"))
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn run(
        &mut self,
        states: &Value,
        start: &str,
        mut input: Value,
        context: &Value,
    ) -> Result<Value, Failed> {
        let mut current = start.to_owned();
        loop {
            within_limit(&format!("the input of {current}"), &input);
            self.visited.push(current.clone());
            let state = &states[&current];
            let output = match state["Type"].as_str().unwrap() {
                "Task" => match self.task(&current, state, &input, context)? {
                    Ok(output) => output,
                    Err((next, output)) => {
                        input = output;
                        current = next;
                        continue;
                    }
                },
                "Choice" => {
                    current = Self::choose(&current, state, &input, context);
                    continue;
                }
                "Pass" => {
                    let result = match (state.get("Parameters"), state.get("Result")) {
                        (Some(params), _) => template(params, &input, context),
                        (None, Some(result)) => result.clone(),
                        (None, None) => input.clone(),
                    };
                    let output = set_result(input.clone(), state.get("ResultPath"), result);
                    output_path(state, output, context)
                }
                "Succeed" => return Ok(input),
                "Fail" => {
                    return Err(Failed {
                        error: state["Error"].as_str().unwrap_or_default().to_owned(),
                        cause: state["Cause"].as_str().unwrap_or_default().to_owned(),
                    });
                }
                "Map" => {
                    let output = self.map(state, &input, context)?;
                    output_path(state, output, context)
                }
                other => panic!("state type {other} is not interpreted"),
            };
            within_limit(&format!("the output of {current}"), &output);
            if state.get("End").is_some_and(|e| e == true) {
                return Ok(output);
            }
            input = output;
            current = state["Next"].as_str().expect("Next or End").to_owned();
        }
    }

    fn map(&mut self, state: &Value, input: &Value, context: &Value) -> Result<Value, Failed> {
        let processor = &state["ItemProcessor"];
        let items = match processor["ProcessorConfig"]["Mode"].as_str() {
            Some("INLINE") => {
                assert!(state.get("ItemReader").is_none());
                path(input, context, state["ItemsPath"].as_str().unwrap())
            }
            Some("DISTRIBUTED") => {
                assert_eq!(processor["ProcessorConfig"]["ExecutionType"], "STANDARD");
                assert_eq!(state["ToleratedFailurePercentage"], 0, "no item may fail");
                assert!(state.get("ItemsPath").is_none());
                self.read_items(&state["ItemReader"], input, context)
            }
            other => panic!("ProcessorConfig.Mode {other:?}"),
        };
        let concurrency = path(
            input,
            context,
            state["MaxConcurrencyPath"].as_str().unwrap(),
        );
        assert!(
            concurrency.as_u64().is_some_and(|c| c >= 1),
            "MaxConcurrencyPath must give a count"
        );
        let mut results = vec![];
        for (index, item) in items
            .as_array()
            .expect("the Map's items are a list")
            .iter()
            .enumerate()
        {
            let map_context = json!({ "Map": { "Item": { "Value": item, "Index": index } } });
            let item_input = template(&state["ItemSelector"], input, &map_context);
            let start = processor["StartAt"].as_str().unwrap();
            results.push(self.run(&processor["States"], start, item_input, &map_context)?);
        }
        // The Map gathers every iteration's output whatever its ResultPath says.
        let results = Value::Array(results);
        within_limit("the Map's collected results", &results);
        let results = match state.get("ResultSelector") {
            Some(selector) => template(selector, &results, context),
            None => results,
        };
        Ok(set_result(input.clone(), state.get("ResultPath"), results))
    }

    /// What an `ItemReader` of a JSON object in S3 yields: the array in the object.
    fn read_items(&self, reader: &Value, input: &Value, context: &Value) -> Value {
        assert_eq!(reader["Resource"], "arn:aws:states:::s3:getObject");
        assert_eq!(reader["ReaderConfig"]["InputType"], "JSON");
        let params = template(&reader["Parameters"], input, context);
        let (bucket, key) = (
            params["Bucket"].as_str().expect("Bucket").to_owned(),
            params["Key"].as_str().expect("Key").to_owned(),
        );
        let endpoint = self
            .s3_endpoint
            .expect("a Distributed Map ran but the walker has no S3 endpoint");
        let body = super::aws::runtime().block_on(async {
            let sdk = super::aws::sdk(endpoint).await;
            let object = super::aws::s3_client(&sdk)
                .get_object()
                .bucket(&bucket)
                .key(&key)
                .send()
                .await
                .unwrap_or_else(|e| panic!("ItemReader: s3://{bucket}/{key}: {e:?}"));
            object.body.collect().await.unwrap().into_bytes()
        });
        let items: Value = serde_json::from_slice(&body).expect("the object is JSON");
        assert!(items.is_array(), "InputType JSON needs an array: {items}");
        items
    }
}
