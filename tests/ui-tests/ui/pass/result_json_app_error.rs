use axum::extract::{FromRef, State};
use axum::routing::post;
use axum::Router;
use idem_axum::idempotent;
use idem_core::{Engine, MemoryStore};

#[derive(Clone, FromRef)]
struct App {
    engine: Engine,
}

fn app() -> App {
    App { engine: Engine::new(MemoryStore::new()) }
}
use axum::{http::StatusCode, response::{IntoResponse, Response}, Json};

#[derive(serde::Serialize, serde::Deserialize)]
struct Order { sku: String, qty: u32 }

#[derive(serde::Serialize)]
struct Placed { id: u64 }

enum AppError { Invalid(&'static str), Internal }

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match self {
            AppError::Invalid(why) => (StatusCode::UNPROCESSABLE_ENTITY, why).into_response(),
            AppError::Internal => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
}

fn store(_: &Order) -> Result<u64, std::io::Error> { Ok(7) }

#[idempotent(ttl = "7d")]
async fn place(State(_app): State<App>, Json(order): Json<Order>) -> Result<Json<Placed>, AppError> {
    if order.qty == 0 {
        return Err(AppError::Invalid("qty must be positive"));
    }
    let id = store(&order).map_err(|_| AppError::Internal)?;
    Ok(Json(Placed { id }))
}

fn main() {
    let _: Router = Router::new().route("/orders", post(place)).with_state(app());
}
