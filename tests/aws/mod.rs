//! Against moto's server mode: S3 parts and DynamoDB state, S3 encryption, the source URL
//! from Secrets Manager, the Step Functions baseline, and the Lambda face (its graceful
//! stop included).

mod baseline_asl;
mod baseline_sfn;
mod catalog;
mod doctor;
mod drain;
mod lambda_face;
mod lambda_shutdown;
mod lost_responses;
mod materialize;
mod s3_encryption;
mod secrets;
mod stalls;
