//! What a Lambda invocation asks for.
//!
//! Guarantees: an event without an `action` (an EventBridge scheduled event, or `{}`) is
//! a drain; `{"action": "drain"}` likewise; the baseline actions, `compact`, `compact.plan`, `forget`, `verify`
//! and the verify walker's tasks are recognised by name;
//! anything else is a config-class error naming the action — never silently a drain.

use serde_json::Value;

use crate::error::{Code, Error, Result};

/// The task an invocation runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Drain,
    BaselineAnchor,
    BaselinePlan,
    BaselineChunk,
    BaselineFinish,
    /// `sluice materialize`: every table's current state (or `"tables": [...]`).
    Materialize,
    /// `sluice compact` (optionally `{"tables": [...]}`).
    Compact,
    /// The compaction machine's plan: the job's tables as Map items
    /// ([`crate::compaction::fan_out`]).
    CompactPlan,
    /// `sluice forget` (`{"table": "...", "keys": ["col=value", ...]}`).
    Forget,
    /// `sluice verify` of every table, or `{"table": ...}`; optionally `"sample": PCT`,
    /// `"repair": true`.
    Verify,
    /// The verify walker's tasks ([`crate::verify::walk`]).
    VerifyPlan,
    VerifyChunk,
    VerifyFinish,
}

impl Action {
    /// The `action` text of each task (the Step Functions payloads use it).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Drain => "drain",
            Action::BaselineAnchor => "baseline.anchor",
            Action::BaselinePlan => "baseline.plan",
            Action::BaselineChunk => "baseline.chunk",
            Action::BaselineFinish => "baseline.finish",
            Action::Materialize => "materialize",
            Action::Compact => "compact",
            Action::CompactPlan => "compact.plan",
            Action::Forget => "forget",
            Action::Verify => "verify",
            Action::VerifyPlan => "verify.plan",
            Action::VerifyChunk => "verify.chunk",
            Action::VerifyFinish => "verify.finish",
        }
    }
}

/// Reads the action of an invocation payload.
pub fn action_of(event: &Value) -> Result<Action> {
    let Some(action) = event.get("action") else {
        return Ok(Action::Drain);
    };
    let name = action.as_str().ok_or_else(|| {
        Error::new(
            Code::ConfigInvalid,
            format!("the event's action must be a string, got {action}"),
        )
        .hint("send {\"action\": \"drain\"} or an EventBridge scheduled event")
    })?;
    [
        Action::Drain,
        Action::BaselineAnchor,
        Action::BaselinePlan,
        Action::BaselineChunk,
        Action::BaselineFinish,
        Action::Materialize,
        Action::Compact,
        Action::CompactPlan,
        Action::Forget,
        Action::Verify,
        Action::VerifyPlan,
        Action::VerifyChunk,
        Action::VerifyFinish,
    ]
    .into_iter()
    .find(|a| a.name() == name)
    .ok_or_else(|| {
        Error::new(Code::ConfigInvalid, format!("unknown action {name:?}")).hint(
            "actions are drain, baseline.anchor, baseline.plan, baseline.chunk, baseline.finish, materialize, compact, compact.plan, forget, verify, verify.plan, verify.chunk, verify.finish",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scheduled_events_and_empty_payloads_drain() {
        let scheduled = json!({
            "version": "0", "id": "53dc4d37", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2026-12-01T18:43:48Z", "region": "eu-west-1",
            "resources": ["arn:aws:events:eu-west-1:123456789012:rule/sluice-orders"], "detail": {}
        });
        assert_eq!(action_of(&scheduled).unwrap(), Action::Drain);
        assert_eq!(action_of(&json!({})).unwrap(), Action::Drain);
        assert_eq!(action_of(&json!(null)).unwrap(), Action::Drain);
        assert_eq!(
            action_of(&json!({"action": "materialize"})).unwrap(),
            Action::Materialize
        );
        assert_eq!(
            action_of(&json!({"action": "drain"})).unwrap(),
            Action::Drain
        );
    }

    #[test]
    fn baseline_actions_are_recognised() {
        for action in [
            "baseline.anchor",
            "baseline.plan",
            "baseline.chunk",
            "baseline.finish",
            "compact",
            "compact.plan",
            "forget",
            "verify",
            "verify.plan",
            "verify.chunk",
            "verify.finish",
        ] {
            assert_eq!(
                action_of(&json!({ "action": action })).unwrap().name(),
                action
            );
        }
    }

    #[test]
    fn unknown_actions_are_config_errors() {
        for event in [json!({"action": "dran"}), json!({"action": 7})] {
            let err = action_of(&event).unwrap_err();
            assert_eq!(err.code(), Code::ConfigInvalid, "{event}");
        }
    }
}
