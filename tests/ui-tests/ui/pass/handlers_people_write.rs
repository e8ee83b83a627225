//! Handlers as services write them: grouped on a type whose helpers they
//! call through `Self::` (axum and actix-web), an actix-web app whose engine
//! lives in its own state, and a function whose argument's type is named
//! `State`.

use actix_web::web::{self, Data};
use actix_web::HttpResponse;
use axum::extract::{FromRef, State};
use axum::Json;
use idem_core::{Engine, Failure, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

#[derive(Deserialize, Serialize)]
struct Order {
    qty: u32,
}

struct Orders;

impl Orders {
    fn limit() -> u32 {
        10
    }

    #[idem_axum::idempotent]
    async fn place(State(_app): State<App>, Json(order): Json<Order>) -> Result<String, String> {
        if order.qty > Self::limit() {
            return Err("too many".into());
        }
        Ok(order.qty.to_string())
    }

    #[idem_actix::idempotent]
    async fn cancel(body: web::Json<Order>) -> HttpResponse {
        HttpResponse::Ok().body((Self::limit() - body.qty.min(10)).to_string())
    }
}

struct AppState {
    engine: Engine,
}

impl AsRef<Engine> for AppState {
    fn as_ref(&self) -> &Engine {
        &self.engine
    }
}

#[idem_actix::idempotent]
async fn refund(state: Data<AppState>, body: String) -> HttpResponse {
    let _ = &state.engine;
    HttpResponse::Ok().body(body)
}

#[derive(Clone, Copy, Serialize, Deserialize)]
enum Step {
    Pending,
    Done,
}

#[derive(Debug, Serialize, Deserialize)]
struct Stuck;

impl Failure for Stuck {
    fn is_final(&self) -> bool {
        true
    }
}

mod workflow {
    use super::{Step, Stuck};
    use idem_core::{idempotent, Engine};

    pub type State = Step;

    #[idempotent(engine = engine, key = id)]
    pub async fn advance(engine: &Engine, id: &str, from: State) -> Result<State, Stuck> {
        let _ = engine;
        Ok(match from {
            Step::Pending | Step::Done => Step::Done,
        })
    }
}

fn main() {
    let _: axum::Router = axum::Router::new()
        .route("/orders", axum::routing::post(Orders::place))
        .with_state(App {
            engine: Engine::new(MemoryStore::new()),
        });
    let state = Data::new(AppState {
        engine: Engine::new(MemoryStore::new()),
    });
    let _ = actix_web::App::new()
        .app_data(state)
        .route("/orders/cancel", web::post().to(Orders::cancel))
        .route("/refunds", web::post().to(refund));
    let _ = workflow::advance;
}
