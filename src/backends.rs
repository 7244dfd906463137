//! The opened backends of a job: its state store and its destination, built once from
//! the config and reused across runs (the Lambda face keeps them for the container's
//! lifetime). Drain, baseline and the job room all take them from here.

use crate::config::Config;
use crate::destination::{self, Destination};
use crate::error::Result;
use crate::state::{self, StateStore};

/// The state store and destination of a job.
pub struct Backends {
    pub state: Box<dyn StateStore>,
    pub destination: Box<dyn Destination>,
}

impl Backends {
    /// Opens the backends the config names.
    pub async fn open(config: &Config) -> Result<Backends> {
        Ok(Backends {
            state: state::open(config).await?,
            destination: destination::open(config).await?,
        })
    }
}
