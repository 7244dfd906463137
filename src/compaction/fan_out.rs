//! The compaction state machine's plan (`{"action": "compact.plan"}`,
//! infra/stepfunctions/compact.asl.json): the job's tables as Map items, one table each,
//! and how many run at once.
//!
//! Guarantees: every table of `source.tables` is one item, in the config's order, and no
//! other; a config compaction cannot serve is refused here, before any table runs (the
//! same check `sluice compact` makes); `parallel` is the execution input's, or
//! [`DEFAULT_PARALLEL`], and always within 1..=[`MAX_PARALLEL`] (an inline Map's useful
//! concurrency) — a value outside it is a config error, never silently clamped.

use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::error::{Code, Error, Result};

/// Tables compacted at once when the execution input does not say.
pub const DEFAULT_PARALLEL: u64 = 4;
/// The most tables one execution compacts at once.
pub const MAX_PARALLEL: u64 = 40;

/// One Map item: the tables one `compact` invocation takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    pub tables: Vec<String>,
}

/// What the machine's `Tables` state receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub items: Vec<Item>,
    pub parallel: u64,
}

/// The plan for `config`, with `input` the execution's input (`{"parallel": N}` or
/// nothing).
pub fn plan(config: &Config, input: Option<&Value>) -> Result<Plan> {
    super::check_supported(config)?;
    let parallel = match input.and_then(|i| i.get("parallel")) {
        None | Some(Value::Null) => DEFAULT_PARALLEL,
        Some(value) => value
            .as_u64()
            .filter(|n| (1..=MAX_PARALLEL).contains(n))
            .ok_or_else(|| {
                Error::new(
                    Code::ConfigInvalid,
                    format!("compact.plan: parallel must be a whole number from 1 to {MAX_PARALLEL}, got {value}"),
                )
                .hint("start the compaction machine with {\"parallel\": 4}, or with {} for the default")
            })?,
    };
    Ok(Plan {
        items: config
            .source
            .tables
            .iter()
            .map(|t| Item {
                tables: vec![t.clone()],
            })
            .collect(),
        parallel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JOB: &str = "job: j\nsource:\n  url: postgres://postgres@127.0.0.1:5432/app\n  tables: [public.b, public.a]\n  postgres: { slot: s, publication: p }\nstate: { type: local, path: ./s }\n";

    fn config(destination: &str) -> Config {
        Config::parse(&format!("{JOB}destination: {destination}\n"), "t").unwrap()
    }

    #[test]
    fn every_table_is_one_item_in_the_configs_order() {
        let plan = plan(&config("{ type: local, path: ./o }"), None).unwrap();
        assert_eq!(
            serde_json::to_value(&plan).unwrap(),
            json!({"items": [{"tables": ["public.b"]}, {"tables": ["public.a"]}], "parallel": DEFAULT_PARALLEL})
        );
    }

    #[test]
    fn parallel_comes_from_the_input_and_a_bad_one_is_refused() {
        let config = config("{ type: local, path: ./o }");
        assert_eq!(
            plan(&config, Some(&json!({"parallel": 12})))
                .unwrap()
                .parallel,
            12
        );
        assert_eq!(
            plan(&config, Some(&json!({"parallel": null})))
                .unwrap()
                .parallel,
            DEFAULT_PARALLEL
        );
        for bad in [json!(0), json!(41), json!(2.5), json!("4"), json!(-1)] {
            let e = plan(&config, Some(&json!({ "parallel": bad }))).unwrap_err();
            assert_eq!(e.code(), Code::ConfigInvalid, "{bad}");
        }
    }

    #[test]
    fn a_config_compaction_cannot_serve_is_refused_before_any_table() {
        let e = plan(&config("{ type: stdout }"), None).unwrap_err();
        assert_eq!(e.code(), Code::CompactionUnsupported);
    }
}
