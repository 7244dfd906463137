//! The one error type of sluice.
//!
//! Every failure carries a stable [`Code`] (printed as `SLUICE_…`, safe to match on in
//! scripts and alarms), a [`Class`] that decides what the caller does next (retry, fix the
//! config, or take an operator action), a message that names the object at fault, and a
//! hint that names the exact setting, grant or recovery step. Source chains are kept as
//! `#[source]`, never flattened into the message.

use std::fmt;

/// What the caller should do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Fix the configuration file or environment; retrying changes nothing.
    Config,
    /// A passing condition (network, throttling, a server restart): retry later, nothing moved.
    Transient,
    /// The run refused to continue to protect the data; an operator must act (the hint says how).
    Refusal,
}

impl Class {
    /// Process exit code for this class (docs/operations.md, Exit codes; 2 is clap's).
    pub fn exit_code(self) -> i32 {
        match self {
            Class::Config => 1,
            Class::Transient => 3,
            Class::Refusal => 5,
        }
    }
}

macro_rules! codes {
    ($($variant:ident => $text:literal, $class:ident;)*) => {
        /// Stable error codes. The text form is a public contract: never rename one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code { $($variant,)* }

        impl Code {
            /// The stable `SLUICE_…` text.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text,)* }
            }
            /// The class every error with this code has.
            pub fn class(self) -> Class {
                match self { $(Code::$variant => Class::$class,)* }
            }
            /// Every code, for documentation and tests.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
        }
    };
}

codes! {
    ConfigInvalid => "SLUICE_CONFIG_INVALID", Config;
    ConfigSecret => "SLUICE_CONFIG_SECRET", Config;
    ConfigTlsRequired => "SLUICE_CONFIG_TLS_REQUIRED", Config;
    ConfigUnsupportedSource => "SLUICE_CONFIG_UNSUPPORTED_SOURCE", Config;
    ConfigResourceClaimed => "SLUICE_CONFIG_RESOURCE_CLAIMED", Config;
    ConfigPolicy => "SLUICE_CONFIG_POLICY", Config;
    SourceConnect => "SLUICE_SOURCE_CONNECT", Transient;
    SourceQuery => "SLUICE_SOURCE_QUERY", Transient;
    SourceAuth => "SLUICE_SOURCE_AUTH", Refusal;
    SourceSecretDenied => "SLUICE_SOURCE_SECRET_DENIED", Refusal;
    SourceSecretUnavailable => "SLUICE_SOURCE_SECRET_UNAVAILABLE", Transient;
    SourceTls => "SLUICE_SOURCE_TLS", Refusal;
    SourcePrerequisite => "SLUICE_SOURCE_PREREQUISITE", Refusal;
    SourceLogGap => "SLUICE_SOURCE_LOG_GAP", Refusal;
    SourceForeignCheckpoint => "SLUICE_SOURCE_FOREIGN_CHECKPOINT", Refusal;
    SourceFailoverGap => "SLUICE_SOURCE_FAILOVER_GAP", Refusal;
    SourceSchemaChange => "SLUICE_SOURCE_SCHEMA_CHANGE", Refusal;
    SourceTableRebaselined => "SLUICE_SOURCE_TABLE_REBASELINED", Refusal;
    SourceTableGone => "SLUICE_SOURCE_TABLE_GONE", Refusal;
    SourceKeyDeferrable => "SLUICE_SOURCE_KEY_DEFERRABLE", Refusal;
    SourcePublicationFiltered => "SLUICE_SOURCE_PUBLICATION_FILTERED", Refusal;
    SourcePublicationAllTables => "SLUICE_SOURCE_PUBLICATION_ALL_TABLES", Refusal;
    SourcePolicyChange => "SLUICE_SOURCE_POLICY_CHANGE", Refusal;
    SourceSlotBusy => "SLUICE_SOURCE_SLOT_BUSY", Transient;
    SourceSlotNotOurs => "SLUICE_SOURCE_SLOT_NOT_OURS", Refusal;
    SourceUnsupportedType => "SLUICE_SOURCE_UNSUPPORTED_TYPE", Refusal;
    SourceProtocol => "SLUICE_SOURCE_PROTOCOL", Refusal;
    SourceTransactionTooLarge => "SLUICE_SOURCE_TRANSACTION_TOO_LARGE", Refusal;
    SourceTransactionTooLong => "SLUICE_SOURCE_TRANSACTION_TOO_LONG", Refusal;
    ValueUnrepresentable => "SLUICE_VALUE_UNREPRESENTABLE", Refusal;
    OutputChecksum => "SLUICE_OUTPUT_CHECKSUM", Refusal;
    OutputWrite => "SLUICE_OUTPUT_WRITE", Transient;
    SpillFull => "SLUICE_SPILL_FULL", Transient;
    SpillDenied => "SLUICE_SPILL_DENIED", Refusal;
    DestinationUnavailable => "SLUICE_DESTINATION_UNAVAILABLE", Transient;
    DestinationExists => "SLUICE_DESTINATION_EXISTS", Refusal;
    DestinationDenied => "SLUICE_DESTINATION_DENIED", Refusal;
    DestinationRejected => "SLUICE_DESTINATION_REJECTED", Refusal;
    DestinationStdoutClosed => "SLUICE_DESTINATION_STDOUT_CLOSED", Transient;
    DestinationStdoutBaseline => "SLUICE_DESTINATION_STDOUT_BASELINE", Config;
    StateUnavailable => "SLUICE_STATE_UNAVAILABLE", Transient;
    StateFenced => "SLUICE_STATE_FENCED", Transient;
    StateCorrupt => "SLUICE_STATE_CORRUPT", Refusal;
    StateDenied => "SLUICE_STATE_DENIED", Refusal;
    StateRejected => "SLUICE_STATE_REJECTED", Refusal;
    StateConflict => "SLUICE_STATE_CONFLICT", Refusal;
    StateLeaseHeld => "SLUICE_STATE_LEASE_HELD", Transient;
    BaselineIncomplete => "SLUICE_BASELINE_INCOMPLETE", Transient;
    BaselineNotAnchored => "SLUICE_BASELINE_NOT_ANCHORED", Refusal;
    BaselineStart => "SLUICE_BASELINE_START", Transient;
    BaselineStartDenied => "SLUICE_BASELINE_START_DENIED", Refusal;
    BaselineRebaselineUnsupported => "SLUICE_BASELINE_REBASELINE_UNSUPPORTED", Refusal;
    CatalogUnavailable => "SLUICE_CATALOG_UNAVAILABLE", Transient;
    CatalogDenied => "SLUICE_CATALOG_DENIED", Refusal;
    CatalogRejected => "SLUICE_CATALOG_REJECTED", Refusal;
    IcebergType => "SLUICE_ICEBERG_TYPE", Refusal;
    IcebergSchema => "SLUICE_ICEBERG_SCHEMA", Refusal;
    IcebergCatalog => "SLUICE_ICEBERG_CATALOG", Transient;
    IcebergCatalogDenied => "SLUICE_ICEBERG_CATALOG_DENIED", Refusal;
    IcebergCatalogRejected => "SLUICE_ICEBERG_CATALOG_REJECTED", Refusal;
    IcebergConflict => "SLUICE_ICEBERG_CONFLICT", Transient;
    IcebergMetadata => "SLUICE_ICEBERG_METADATA", Refusal;
    RecoveryRefused => "SLUICE_RECOVERY_REFUSED", Refusal;
    CompactionPartCorrupt => "SLUICE_COMPACTION_PART_CORRUPT", Refusal;
    CompactionUnsupported => "SLUICE_COMPACTION_UNSUPPORTED", Config;
    ForgetUnsupported => "SLUICE_FORGET_UNSUPPORTED", Config;
    ForgetKeyPresent => "SLUICE_FORGET_KEY_PRESENT", Refusal;
    ForgetPartCorrupt => "SLUICE_FORGET_PART_CORRUPT", Refusal;
    VerifyDiffers => "SLUICE_VERIFY_DIFFERS", Refusal;
    VerifyUnsupported => "SLUICE_VERIFY_UNSUPPORTED", Config;
    VerifyLakeBehind => "SLUICE_VERIFY_LAKE_BEHIND", Transient;
    VerifyWalkIncomplete => "SLUICE_VERIFY_WALK_INCOMPLETE", Refusal;
    ReplayNoSchema => "SLUICE_REPLAY_NO_SCHEMA", Refusal;
    ReplayNoKey => "SLUICE_REPLAY_NO_KEY", Refusal;
    ReplayMergeKeyless => "SLUICE_REPLAY_MERGE_KEYLESS", Refusal;
    ReplayCurrentState => "SLUICE_REPLAY_CURRENT_STATE", Refusal;
    FoldInput => "SLUICE_FOLD_INPUT", Refusal;
    LakeFileGone => "SLUICE_LAKE_FILE_GONE", Transient;
    RunInterrupted => "SLUICE_RUN_INTERRUPTED", Transient;
    FaultInjected => "SLUICE_FAULT_INJECTED", Transient;
    Internal => "SLUICE_INTERNAL", Refusal;
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A sluice error: code, message, operator hint, and the underlying cause.
///
/// One pointer wide: every `Result` on the hot path carries an `Error` in its failure
/// variant, so its size is paid by every success too.
pub struct Error(Box<Details>);

struct Details {
    code: Code,
    message: String,
    hint: Option<String>,
    source: Option<BoxedSource>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.0.code)
            .field("message", &self.0.message)
            .field("hint", &self.0.hint)
            .field("source", &self.0.source)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error with a code and a message that names the object at fault.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error(Box::new(Details {
            code,
            message: message.into(),
            hint: None,
            source: None,
        }))
    }

    /// Adds the operator hint: the exact setting, grant or recovery step.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.0.hint = Some(hint.into());
        self
    }

    /// Keeps the underlying cause in the source chain.
    pub fn source(mut self, source: impl Into<BoxedSource>) -> Self {
        self.0.source = Some(source.into());
        self
    }

    /// The stable code.
    pub fn code(&self) -> Code {
        self.0.code
    }

    /// What the caller should do next.
    pub fn class(&self) -> Class {
        self.0.code.class()
    }

    /// The message without code or hint.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The operator hint, when there is one.
    pub fn hint_text(&self) -> Option<&str> {
        self.0.hint.as_deref()
    }

    /// The message followed by every cause in the chain, `: `-separated, for one log line.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(err) = cause {
            text.push_str(": ");
            text.push_str(&err.to_string());
            cause = err.source();
        }
        text
    }

    /// The error as a JSON object (`code`, `class`, `message`, `hint`, `cause`), for
    /// machine-readable output; every URL in it has already been redacted by its producer.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "code": self.0.code.as_str(),
            "class": self.class(),
            "message": self.chain(),
            "hint": self.0.hint,
        })
    }
}

/// Shorthand for building an [`Error`] with `format!` arguments.
#[macro_export]
macro_rules! err {
    ($code:ident, $($arg:tt)*) => {
        $crate::error::Error::new($crate::error::Code::$code, format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            assert!(code.as_str().starts_with("SLUICE_"), "{code}");
            assert!(seen.insert(code.as_str()), "duplicate {code}");
        }
    }

    #[test]
    fn chain_keeps_the_cause() {
        let io = std::io::Error::other("disk on fire");
        let e = Error::new(Code::OutputWrite, "writing part").source(io);
        assert_eq!(e.chain(), "SLUICE_OUTPUT_WRITE: writing part: disk on fire");
        assert_eq!(e.class().exit_code(), 3);
    }

    /// Every code's class, written out: what a scheduler should do with it. Transient =
    /// retry later (nothing moved, the cause passes by itself); refusal = stop and page an
    /// operator (retrying changes nothing); config = fix the file or environment.
    /// Reclassifying a code is a deliberate edit here, and a new code must be added.
    #[test]
    fn every_code_has_the_class_a_scheduler_needs() {
        use Class::{Config as C, Refusal as R, Transient as T};
        let expected: &[(Code, Class)] = &[
            (Code::ConfigInvalid, C),
            (Code::ConfigSecret, C),
            (Code::ConfigTlsRequired, C),
            (Code::ConfigUnsupportedSource, C),
            (Code::ConfigResourceClaimed, C),
            (Code::ConfigPolicy, C),
            // The network or the server is down for now.
            (Code::SourceConnect, T),
            (Code::SourceQuery, T),
            // Wrong credentials or a missing grant stay wrong.
            (Code::SourceAuth, R),
            (Code::SourceSecretDenied, R),
            (Code::SourceSecretUnavailable, T),
            (Code::SourceTls, R),
            (Code::SourcePrerequisite, R),
            (Code::SourceLogGap, R),
            (Code::SourceForeignCheckpoint, R),
            // The new server lacks changes the checkpoint has: only a re-baseline helps.
            (Code::SourceFailoverGap, R),
            (Code::SourceSchemaChange, R),
            // Logged as a warning (never raised): the table alone is re-baselined.
            (Code::SourceTableRebaselined, R),
            // Logged as a warning (never raised): the other tables go on.
            (Code::SourceTableGone, R),
            // The table's or the publication's definition stays wrong until an
            // operator changes it (the hint names the statement).
            (Code::SourceKeyDeferrable, R),
            (Code::SourcePublicationFiltered, R),
            (Code::SourcePublicationAllTables, R),
            (Code::SourcePolicyChange, R),
            // Another consumer's session ends by itself.
            (Code::SourceSlotBusy, T),
            // Another job's slot, or one from before the job's state was lost: an
            // operator decides (adopt_slot, or a slot of its own).
            (Code::SourceSlotNotOurs, R),
            (Code::SourceUnsupportedType, R),
            (Code::SourceProtocol, R),
            (Code::SourceTransactionTooLarge, R),
            (Code::SourceTransactionTooLong, R),
            (Code::ValueUnrepresentable, R),
            (Code::OutputChecksum, R),
            (Code::OutputWrite, T),
            (Code::SpillFull, T),
            // A directory we may not write to stays so.
            (Code::SpillDenied, R),
            (Code::DestinationUnavailable, T),
            (Code::DestinationExists, R),
            // Not writable (local), an IAM action denied (S3).
            (Code::DestinationDenied, R),
            // S3 answered that the request is wrong for this bucket (another region, an
            // unusable KMS key): the next run would get the same answer.
            (Code::DestinationRejected, R),
            // The reader of stdout went away; the next run emits the changes again.
            (Code::DestinationStdoutClosed, T),
            // A baseline asked of a stdout job: the config (or the command) must change.
            (Code::DestinationStdoutBaseline, C),
            (Code::StateUnavailable, T),
            // The next run resumes from the stored checkpoint.
            (Code::StateFenced, T),
            (Code::StateCorrupt, R),
            (Code::StateDenied, R),
            // DynamoDB answered that the request is wrong for this table (not a sluice
            // state table): the same next time.
            (Code::StateRejected, R),
            (Code::StateConflict, R),
            (Code::StateLeaseHeld, T),
            (Code::BaselineIncomplete, T),
            (Code::BaselineNotAnchored, R),
            (Code::BaselineStart, T),
            (Code::BaselineStartDenied, R),
            (Code::BaselineRebaselineUnsupported, R),
            // Glue unreachable or throttling: the next run registers again.
            (Code::CatalogUnavailable, T),
            (Code::CatalogDenied, R),
            (Code::CatalogRejected, R),
            (Code::IcebergType, R),
            (Code::IcebergSchema, R),
            // The catalog file locked or unreachable, or another writer won every retry:
            // the run failed before its checkpoint, the next run commits again.
            (Code::IcebergCatalog, T),
            // Glue refused the credentials or an IAM action, or the request as invalid
            // (the name holds a table that is not Iceberg): the same next time.
            (Code::IcebergCatalogDenied, R),
            (Code::IcebergCatalogRejected, R),
            (Code::IcebergConflict, T),
            (Code::IcebergMetadata, R),
            (Code::RecoveryRefused, R),
            // A part does not hold the rows its manifest recorded (or is gone): it is
            // neither rewritten nor removed until an operator restores it.
            (Code::CompactionPartCorrupt, R),
            // Compaction asked of an output it cannot rewrite yet (an Iceberg change log,
            // stdout): the config decides.
            (Code::CompactionUnsupported, C),
            // Forget asked of a table or output it cannot rewrite (no key, Iceberg,
            // stdout): the config decides.
            (Code::ForgetUnsupported, C),
            // The replay still holds the key: the source must delete it first.
            (Code::ForgetKeyPresent, R),
            (Code::ForgetPartCorrupt, R),
            // `sluice verify` found rows the lake and the source disagree on, re-checked
            // at one exact source position: the same next time until repaired.
            (Code::VerifyDiffers, R),
            (Code::VerifyUnsupported, C),
            // The drain verify runs to bring the lake past its read could not run (another
            // run held the job's lease): the next verify drains again.
            (Code::VerifyLakeBehind, T),
            // A verify walk's finish met a chunk without a result: a new walk is needed.
            (Code::VerifyWalkIncomplete, R),
            (Code::ReplayNoSchema, R),
            (Code::ReplayNoKey, R),
            (Code::ReplayMergeKeyless, R),
            // `sluice sql --current-state` with no state built yet, or in a dialect that
            // cannot follow the pointer at query time.
            (Code::ReplayCurrentState, R),
            (Code::FoldInput, R),
            // A file listed a moment ago was removed by a compaction (or a forget) before
            // it was read: the listing is stale, the next read lists again.
            (Code::LakeFileGone, T),
            // Stopped by a signal where a crash could have stopped it; the next run resumes.
            (Code::RunInterrupted, T),
            (Code::FaultInjected, T),
            (Code::Internal, R),
        ];
        for (code, class) in expected {
            assert_eq!(code.class(), *class, "{code}");
        }
        let listed: std::collections::HashSet<Code> = expected.iter().map(|(c, _)| *c).collect();
        for code in Code::ALL {
            assert!(listed.contains(code), "{code} has no expected class here");
        }
        assert_eq!(listed.len(), Code::ALL.len(), "a code listed twice");
    }

    #[test]
    fn exit_codes_follow_the_design() {
        assert_eq!(Code::ConfigInvalid.class().exit_code(), 1);
        assert_eq!(Code::SourceLogGap.class().exit_code(), 5);
        assert_eq!(Code::StateUnavailable.class().exit_code(), 3);
    }
}
