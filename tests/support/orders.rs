//! An order as the consumer stories' handlers read it, and the transient
//! failure of a carrier that is down.

use idem_core::Failure;
use serde::{Deserialize, Serialize};

/// An order message's payload.
#[derive(Debug, Deserialize)]
pub struct Order {
    /// The order's id, its messages' idempotency key.
    pub order_id: String,
    /// What was ordered; `carrier-down` fails in the stories that need a
    /// failing order.
    pub sku: String,
}

/// The carrier is down: a transient failure, tried again.
#[derive(Debug, Serialize, Deserialize, thiserror::Error)]
#[error("the carrier is down")]
pub struct CarrierDown;

impl Failure for CarrierDown {
    fn is_final(&self) -> bool {
        false
    }
}
