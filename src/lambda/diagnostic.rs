//! Maps sluice errors to Lambda error responses.
//!
//! Guarantees: `errorType` is one of three stable names — `Sluice.Transient` (retry),
//! `Sluice.Refusal` (non-retryable: an operator must act), `Sluice.Config` (fix the
//! deployment) — so Step Functions `Retry` / `Catch` clauses and alarms can match on it;
//! `errorMessage` starts with the stable `SLUICE_…` code and ends with the hint.

use lambda_runtime::Diagnostic;

use crate::error::{Class, Error};

/// The `errorType` of Lambda responses for retryable failures.
pub const TRANSIENT: &str = "Sluice.Transient";
/// The `errorType` for refusals (never retried automatically).
pub const REFUSAL: &str = "Sluice.Refusal";
/// The `errorType` for configuration errors.
pub const CONFIG: &str = "Sluice.Config";

/// A sluice error on its way out of the handler.
#[derive(Debug)]
pub struct HandlerError(pub Error);

impl From<Error> for HandlerError {
    fn from(e: Error) -> Self {
        HandlerError(e)
    }
}

impl From<HandlerError> for Diagnostic {
    fn from(HandlerError(e): HandlerError) -> Self {
        let error_type = match e.class() {
            Class::Transient => TRANSIENT,
            Class::Refusal => REFUSAL,
            Class::Config => CONFIG,
        };
        let mut message = e.chain();
        if let Some(hint) = e.hint_text() {
            message.push_str(" (hint: ");
            message.push_str(hint);
            message.push(')');
        }
        Diagnostic {
            error_type: error_type.to_owned(),
            error_message: message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    #[test]
    fn classes_map_to_stable_error_types() {
        let cases = [
            (Code::SourceConnect, TRANSIENT),
            (Code::SourceLogGap, REFUSAL),
            (Code::ConfigInvalid, CONFIG),
        ];
        for (code, want) in cases {
            let d: Diagnostic = HandlerError(Error::new(code, "x").hint("do y")).into();
            assert_eq!(d.error_type, want);
            assert!(
                d.error_message.starts_with(code.as_str()),
                "{}",
                d.error_message
            );
            assert!(d.error_message.ends_with("(hint: do y)"));
        }
    }
}
