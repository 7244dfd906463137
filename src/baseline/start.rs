//! Starting the baseline state machine from a drain (`baseline.state_machine_arn`).
//!
//! Guarantees: the anchor is created and recorded before the execution is started, so
//! the drain that follows streams every change after it; the execution's name is derived
//! from the job and the recorded anchor ([`execution_name`]), so a retried drain — or
//! every later drain until the baseline is done — asks for the same execution, and Step
//! Functions either treats the request as idempotent or answers `ExecutionAlreadyExists`,
//! which is success: one anchor, one execution. The client's region comes from the ARN;
//! its endpoint, credentials and retries from the standard AWS configuration
//! ([`crate::aws::shared_config`], which honours `AWS_ENDPOINT_URL`).

use aws_sdk_sfn::error::SdkError;

use crate::aws::{self, Failure};
use crate::backends::Backends;
use crate::config::Config;
use crate::error::{Code, Error, Result};

use super::tasks;

/// What a drain did about the baseline machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub execution_name: String,
    /// The execution's ARN; `None` when it already existed (a retried or later drain).
    pub execution_arn: Option<String>,
    pub anchor: String,
}

/// The region of a Step Functions ARN (`arn:<partition>:states:<region>:<account>:stateMachine:<name>`).
pub fn region_from_arn(arn: &str) -> Result<&str> {
    crate::arn::region(arn, "states", "stateMachine").ok_or_else(|| {
        Error::new(
            Code::ConfigInvalid,
            format!("baseline.state_machine_arn {arn:?} is not a Step Functions state machine ARN"),
        )
        .hint("use the ARN of the baseline machine, arn:aws:states:<region>:<account>:stateMachine:<name> (the Terraform module's state_machine_arn output)")
    })
}

/// The execution name for `job`'s baseline at `anchor`: at most 80 characters of
/// `[A-Za-z0-9_-]`, the same for the same job and anchor, different for another anchor
/// (a re-baseline after `--reset`).
pub fn execution_name(job: &str, anchor: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in job.bytes().chain([0]).chain(anchor.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let readable: String = job
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    format!("baseline-{readable}-{hash:016x}")
}

/// Makes sure the baseline is anchored, then starts (or finds) its execution.
pub async fn start(config: &Config, backends: &Backends, arn: &str) -> Result<Started> {
    let region = region_from_arn(arn)?;
    let anchor = recorded_anchor(config, backends).await?;
    let anchor = match anchor {
        Some(anchor) => anchor,
        None => {
            tasks::anchor(config, backends).await?;
            recorded_anchor(config, backends)
                .await?
                .ok_or_else(|| Error::new(Code::Internal, "the anchor step recorded no anchor"))?
        }
    };
    let name = execution_name(&config.job, &anchor);
    let input = serde_json::json!({ "job": config.job, "anchor": anchor });
    start_execution(arn, region, name, input, anchor).await
}

/// Anchors every wanted re-baseline (or finds the one anchored and not done), then starts
/// (or finds) its execution: named after the job and the re-baseline's plan id, so each
/// re-baseline — even one anchored at the same position as an earlier one — gets its own
/// execution, and a retried drain asks for the same. The input names the tables.
pub async fn start_rebaseline(config: &Config, backends: &Backends, arn: &str) -> Result<Started> {
    let region = region_from_arn(arn)?;
    tasks::anchor(config, backends).await?;
    let pending = crate::state::rebaseline::pending(
        backends.state.as_ref(),
        &config.job,
        &config.source.tables,
    )
    .await?;
    let Some(first) = pending.first() else {
        return Err(Error::new(
            Code::Internal,
            "the anchor step left no re-baseline pending",
        ));
    };
    let name = execution_name(&config.job, &tasks::plan_id(first));
    let tables: Vec<&str> = pending.iter().map(|r| r.table.as_str()).collect();
    let input = serde_json::json!({ "job": config.job, "anchor": first.anchor, "tables": tables });
    start_execution(arn, region, name, input, first.anchor.clone()).await
}

async fn start_execution(
    arn: &str,
    region: &str,
    name: String,
    input: serde_json::Value,
    anchor: String,
) -> Result<Started> {
    let input = input.to_string();
    let sdk = aws::shared_config(None, Some(region)).await?;
    let client = aws_sdk_sfn::Client::new(&sdk);
    let result = client
        .start_execution()
        .state_machine_arn(arn)
        .name(&name)
        .input(input)
        .send()
        .await;
    match result {
        Ok(out) => {
            tracing::info!(execution = %out.execution_arn(), %anchor, "baseline execution started");
            Ok(Started {
                execution_name: name,
                execution_arn: Some(out.execution_arn().to_owned()),
                anchor,
            })
        }
        Err(SdkError::ServiceError(ctx)) if ctx.err().is_execution_already_exists() => {
            tracing::info!(execution = %name, "the baseline execution exists already (if it failed, redrive it)");
            Ok(Started {
                execution_name: name,
                execution_arn: None,
                anchor,
            })
        }
        Err(e) => Err(start_error(arn, e)),
    }
}

/// The anchor recorded for the job's tables, once every table has one.
async fn recorded_anchor(config: &Config, backends: &Backends) -> Result<Option<String>> {
    let mut anchor = None;
    for table in &config.source.tables {
        match backends.state.load_baseline(&config.job, table).await? {
            Some(record) => {
                anchor.get_or_insert(record.anchor);
            }
            None => return Ok(None),
        }
    }
    Ok(anchor)
}

fn start_error(
    arn: &str,
    e: SdkError<
        aws_sdk_sfn::operation::start_execution::StartExecutionError,
        aws_sdk_sfn::config::http::HttpResponse,
    >,
) -> Error {
    let what = format!(
        "starting the baseline execution of {arn}: {}",
        aws::describe_failure(&e)
    );
    let missing = e.as_service_error().is_some_and(|s| {
        s.is_state_machine_does_not_exist() || s.is_state_machine_deleting() || s.is_invalid_arn()
    });
    let busy = e
        .as_service_error()
        .is_some_and(|s| s.is_execution_limit_exceeded());
    let error = if missing {
        Error::new(Code::ConfigInvalid, what).hint(
            "baseline.state_machine_arn names no state machine in that account and region: check the ARN (Terraform output state_machine_arn)",
        )
    } else if busy {
        Error::new(Code::BaselineStart, what)
            .hint("the account's running-execution limit is reached; the next drain retries")
    } else {
        match aws::classify(&e) {
            Failure::Denied => Error::new(Code::BaselineStartDenied, what).hint(
                "allow states:StartExecution on the state machine to the drain's role (the Terraform module grants it to the drain function)",
            ),
            Failure::Missing => Error::new(Code::ConfigInvalid, what)
                .hint("check baseline.state_machine_arn"),
            Failure::Unavailable | Failure::Other => Error::new(Code::BaselineStart, what).hint(
                "Step Functions could not be reached or refused for now; the anchor is recorded and the next drain retries the start",
            ),
        }
    };
    error.source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_comes_from_a_well_formed_arn_only() {
        assert_eq!(
            region_from_arn(
                "arn:aws:states:eu-west-1:123456789012:stateMachine:sluice-orders-baseline"
            )
            .unwrap(),
            "eu-west-1"
        );
        assert_eq!(
            region_from_arn("arn:aws-cn:states:cn-north-1:123456789012:stateMachine:m").unwrap(),
            "cn-north-1"
        );
        for bad in [
            "",
            "arn:aws:states:eu-west-1:123456789012:execution:m:e",
            "arn:aws:lambda:eu-west-1:123456789012:function:f",
            "arn:aws:states::123456789012:stateMachine:m",
            "arn:aws:states:eu-west-1:1234:stateMachine:m",
            "arn:aws:states:eu-west-1:123456789012:stateMachine:",
        ] {
            assert_eq!(
                region_from_arn(bad).unwrap_err().code(),
                Code::ConfigInvalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn execution_names_are_stable_valid_and_anchor_specific() {
        let a = execution_name("orders", "pg:00000001/0000AB12");
        assert_eq!(a, execution_name("orders", "pg:00000001/0000AB12"));
        assert_ne!(a, execution_name("orders", "pg:00000001/0000AB13"));
        assert_ne!(a, execution_name("orders2", "pg:00000001/0000AB12"));
        let long = execution_name(&"x.y/z ".repeat(40), "mysql:b.000001:4;f=1");
        for name in [&a, &long] {
            assert!(name.len() <= 80, "{name}");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{name}"
            );
        }
        assert!(a.starts_with("baseline-orders-"), "{a}");
    }
}
