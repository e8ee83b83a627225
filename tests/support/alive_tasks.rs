//! Counting the runtime's tasks: what a request left running after its
//! client went away.

use std::time::Duration;

/// The number of tasks alive on the current tokio runtime once it has
/// fallen to `before` or less, or after `within` if it has not.
pub async fn alive_tasks_after(before: usize, within: Duration) -> usize {
    let metrics = tokio::runtime::Handle::current().metrics();
    let settled = tokio::time::Instant::now() + within;
    let mut alive = metrics.num_alive_tasks();
    while alive > before && tokio::time::Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(20)).await;
        alive = metrics.num_alive_tasks();
    }
    alive
}

/// The number of tasks alive on the current tokio runtime now.
pub fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}
