//! DynamoDB's answer to a conditional write, read in one place.
//!
//! Guarantees: a write refused by its condition (`ConditionalCheckFailedException`: another
//! writer got there first, or the item is not as the write expected) is told apart from
//! every other failure — throttling, the network, permissions — which stays an error; the
//! same test for each write operation the store makes (`PutItem`, `UpdateItem`,
//! `DeleteItem`).

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

/// The service error of a write operation that takes a condition.
pub trait ConditionalError {
    /// True when the write's condition failed.
    fn condition_failed(&self) -> bool;
}

macro_rules! conditional_error {
    ($($error:ty),*) => {$(
        impl ConditionalError for $error {
            fn condition_failed(&self) -> bool {
                self.is_conditional_check_failed_exception()
            }
        }
    )*};
}

conditional_error!(PutItemError, UpdateItemError, DeleteItemError);

/// True when `err` is the write's condition failing, not a failure of the write.
pub fn condition_failed<E: ConditionalError, R>(err: &SdkError<E, R>) -> bool {
    err.as_service_error().is_some_and(E::condition_failed)
}

/// The answer to a conditional write whose refusal is an answer too: `true` when it was
/// written, `false` when its condition failed, the error otherwise.
pub fn written<T, E: ConditionalError, R>(
    sent: Result<T, SdkError<E, R>>,
) -> Result<bool, SdkError<E, R>> {
    match sent {
        Ok(_) => Ok(true),
        Err(e) if condition_failed(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
